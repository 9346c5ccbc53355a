// Tokens per period shared by nodes through one Redis (SPEC §12): the
// window's rule on the server, reservations that lapse for a node that
// stopped, the same answers as the one-process window.

#include "sluice/runtime/redis/token_ledger.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/spend/token_window.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;

TEST_CASE("token ledger: two nodes share one limit - granted only while "
          "used, in flight and the estimate fit it",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  token_ledger a{ca, "key:k1:tpm", 1000, 60s, 10s, "node-a"};
  token_ledger b{cb, "key:k1:tpm", 1000, 60s, 10s, "node-b"};
  auto a1 = a.reserve(600);
  REQUIRE(a1.answered);
  CHECK(a1.grant.ok);
  CHECK(a1.grant.remaining == 400);
  auto b1 = b.reserve(500); // does not fit beside a's 600 in flight
  REQUIRE(b1.answered);
  CHECK_FALSE(b1.grant.ok);
  CHECK(b1.grant.remaining == 400);
  CHECK(b1.grant.retry_after == duration::zero()); // only a's end frees it
  CHECK(b.reserve(400).grant.ok);
  // a used 300 of its 600: 300 come back, 300 count in the window.
  REQUIRE(a.settle(a1.reservation, 300));
  auto c = b.read();
  REQUIRE(c);
  CHECK(c->used == 300);
  CHECK(c->in_flight == 400);
  auto b2 = b.reserve(300);
  CHECK(b2.grant.ok);
  CHECK(b2.grant.remaining == 0);
  auto too = a.reserve(1001);
  CHECK(too.answered);
  CHECK(too.grant.too_large);
  CHECK_FALSE(too.grant.ok);
  // Settling twice, or an unknown id, frees nothing more.
  REQUIRE(a.settle(a1.reservation, 0));
  REQUIRE(a.settle("node-a:999", 0));
  CHECK(b.read()->in_flight == 700);
}

TEST_CASE("token ledger: under many concurrent nodes the reservations in "
          "flight never pass the limit",
          "[redis]") {
  test_redis server;
  constexpr int nodes = 4;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> granted{0};
  for (int i = 0; i < nodes; ++i)
    threads.emplace_back([&, i] {
      redis_client c{server.config()};
      token_ledger l{c,   "route:chat:tpm",           10'000, 60s,
                     10s, "node-" + std::to_string(i)};
      for (int k = 0; k < 100; ++k) {
        auto o = l.reserve(70);
        if (o.answered && o.grant.ok)
          granted += 70;
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(granted == 70 * (10'000 / 70)); // every fit taken, none beyond
  redis_client c{server.config()};
  token_ledger l{c, "route:chat:tpm", 10'000, 60s, 10s, "reader"};
  CHECK(l.read()->in_flight == granted.load());
}

TEST_CASE("token ledger: a node that stops leaks its reservations for one "
          "TTL at most, and renewed ones stay",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  token_ledger a{ca, "key:k2:tpm", 100, 60s, 300ms, "node-a"};
  token_ledger b{cb, "key:k2:tpm", 100, 60s, 300ms, "node-b"};
  auto kept = b.reserve(40);
  REQUIRE(kept.grant.ok);
  REQUIRE(a.reserve(60).grant.ok); // then node a "dies": never settles
  CHECK_FALSE(b.reserve(1).grant.ok);
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    auto lapsed = b.renew({kept.reservation});
    REQUIRE(lapsed);
    CHECK(lapsed->empty());
  }
  // a's 60 lapsed; b's 40, renewed, are still in flight.
  CHECK(b.read()->in_flight == 40);
  CHECK(b.reserve(60).grant.ok);
  auto lapsed = b.renew({"node-a:1"});
  REQUIRE(lapsed);
  CHECK(*lapsed == std::vector<std::string>{"node-a:1"});
}

TEST_CASE("token ledger: used tokens leave the window a period after their "
          "bucket, and a refusal says when",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  token_ledger l{c, "key:k3:tpm", 100, 600ms, 10s, "node"}; // 10 ms buckets
  auto r = l.reserve(80);
  REQUIRE(r.grant.ok);
  REQUIRE(l.settle(r.reservation, 80));
  auto refused = l.reserve(50);
  REQUIRE(refused.answered);
  CHECK_FALSE(refused.grant.ok);
  CHECK(refused.grant.retry_after > duration::zero());
  CHECK(refused.grant.retry_after <= 610ms);
  std::this_thread::sleep_for(refused.grant.retry_after + 20ms);
  CHECK(l.read()->used == 0);
  CHECK(l.reserve(50).grant.ok);
}

TEST_CASE("token ledger: the same answers as the one-process window for the "
          "same steps",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  token_ledger shared{c, "key:k4:tpm", 500, 60s, 10s, "node"};
  policy::token_window local{500, 60s};
  auto now = steady::now();
  std::vector<std::pair<std::string, uint64_t>> held;
  // Reserve, settle some with more or less than reserved, reserve again.
  for (uint64_t n : {100, 250, 200, 150, 501, 50, 60, 1}) {
    auto s = shared.reserve(n);
    auto w = local.reserve(n, now);
    REQUIRE(s.answered);
    INFO("reserving " << n);
    CHECK(s.grant.ok == w.ok);
    CHECK(s.grant.too_large == w.too_large);
    CHECK(s.grant.remaining == w.remaining);
    if (w.ok)
      held.emplace_back(s.reservation, n);
    if (held.size() == 2) {
      for (auto& [id, amount] : held) {
        shared.settle(id, amount + 10);
        local.settle(amount, amount + 10, now);
      }
      held.clear();
    }
  }
  CHECK(shared.read()->used == local.used(now));
  CHECK(shared.read()->in_flight == local.in_flight());
}

TEST_CASE("token ledger: nonsense settings are refused with their field, "
          "and Redis down is an answer of its own",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  CHECK_THROWS_WITH((token_ledger{c, "x", 0, 60s, 1s, "n"}),
                    Catch::StartsWith("limit:"));
  CHECK_THROWS_WITH(
      (token_ledger{c, "x", token_ledger::max_tokens + 1, 60s, 1s, "n"}),
      Catch::StartsWith("limit:"));
  CHECK_THROWS_WITH((token_ledger{c, "x", 10, 59ms, 1s, "n"}),
                    Catch::StartsWith("period:"));
  CHECK_THROWS_WITH((token_ledger{c, "x", 10, 60s, 99ms, "n"}),
                    Catch::StartsWith("reservation_ttl:"));
  token_ledger l{c, "x", 10, 60s, 1s, "n"};
  server.stop();
  auto o = l.reserve(1);
  CHECK_FALSE(o.answered);
  CHECK_FALSE(o.error.empty());
  CHECK_FALSE(l.read());
  CHECK_FALSE(l.settle("n:1", 1));
}
