// Limits shared by nodes through one Redis (SPEC §12): the token window's
// and the budget's rules on the server, all of a call's limits reserved at
// once or none, reservations that lapse for a node that stopped, the same
// answers as the one-process window.

#include "sluice/runtime/redis/shared_limits.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/civil_days.hpp"
#include "sluice/runtime/policy/spend/token_window.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;

namespace {

shared_limit tpm(std::string name, uint64_t limit, uint64_t amount,
                 duration period = 60s) {
  shared_limit l;
  l.name = std::move(name);
  l.limit = limit;
  l.period = period;
  l.amount = amount;
  return l;
}

shared_limit budget(std::string name, shared_limit::kind k, uint64_t limit,
                    uint64_t amount) {
  shared_limit l;
  l.name = std::move(name);
  l.type = k;
  l.limit = limit;
  l.amount = amount;
  return l;
}

} // namespace

TEST_CASE("shared limits: two nodes share one token limit - granted only "
          "while used, in flight and the estimate fit it",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  shared_limits a{ca, 10s, "node-a"}, b{cb, 10s, "node-b"};
  auto a1 = a.reserve({tpm("key:k1:tpm", 1000, 600)});
  REQUIRE(a1.answered);
  CHECK(a1.ok);
  CHECK(a1.remaining == std::vector<uint64_t>{400});
  auto b1 = b.reserve({tpm("key:k1:tpm", 1000, 500)}); // beside a's 600
  REQUIRE(b1.answered);
  CHECK_FALSE(b1.ok);
  CHECK(b1.refused == 0);
  CHECK(b1.remaining == std::vector<uint64_t>{400});
  CHECK(b1.retry_after == duration::zero()); // only a's end frees it
  CHECK(b.reserve({tpm("key:k1:tpm", 1000, 400)}).ok);
  // a used 300 of its 600: 300 come back, 300 count in the window.
  REQUIRE(a.settle(a1.reservation, {tpm("key:k1:tpm", 1000, 300)}));
  auto c = b.read(tpm("key:k1:tpm", 1000, 0));
  REQUIRE(c);
  CHECK(c->used == 300);
  CHECK(c->in_flight == 400);
  auto b2 = b.reserve({tpm("key:k1:tpm", 1000, 300)});
  CHECK(b2.ok);
  CHECK(b2.remaining == std::vector<uint64_t>{0});
  CHECK(b2.reset_after[0] > 59s);
  auto too = a.reserve({tpm("key:k1:tpm", 1000, 1001)});
  CHECK(too.answered);
  CHECK(too.too_large);
  CHECK_FALSE(too.ok);
  // Settling twice, or an unknown id, frees nothing more.
  REQUIRE(a.settle(a1.reservation, {tpm("key:k1:tpm", 1000, 0)}));
  REQUIRE(a.settle("node-a:999", {tpm("key:k1:tpm", 1000, 0)}));
  CHECK(b.read(tpm("key:k1:tpm", 1000, 0))->in_flight == 700);
}

TEST_CASE("shared limits: a call's limits are reserved all or none, and the "
          "refusal names the one that refused",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits l{c, 10s, "node"};
  using k = shared_limit::kind;
  auto limits = [](uint64_t tokens, uint64_t money) {
    return std::vector<shared_limit>{
        tpm("key:a:tpm", 100, tokens), budget("key:a:day", k::day, 1000, money),
        budget("route:/x:month", k::month, 500, money)};
  };
  auto first = l.reserve(limits(50, 400));
  REQUIRE(first.ok);
  CHECK(first.remaining == std::vector<uint64_t>{50, 600, 100});
  auto second = l.reserve(limits(10, 200)); // the month's 500 refuses
  REQUIRE(second.answered);
  CHECK_FALSE(second.ok);
  CHECK(second.refused == 2);
  CHECK_FALSE(second.too_large);
  CHECK(second.remaining == std::vector<uint64_t>{50, 600, 100});
  // Nothing of the refused call stays in the other two.
  CHECK(l.read(limits(0, 0)[0])->in_flight == 50);
  CHECK(l.read(limits(0, 0)[1])->in_flight == 400);
  // Spent money counts in the budget's period; tokens in the window.
  REQUIRE(l.settle(first.reservation, limits(30, 450)));
  CHECK(l.read(limits(0, 0)[1])->used == 450);
  CHECK(l.read(limits(0, 0)[2])->used == 450);
  CHECK(l.read(limits(0, 0)[2])->in_flight == 0);
  CHECK_FALSE(l.reserve(limits(1, 51)).ok);
  CHECK(l.reserve(limits(1, 50)).ok);
  // The budget's period is the server's day and month since 1970, in UTC
  // (the same calendar as the one-process budget).
  auto now = std::chrono::system_clock::now();
  auto days =
      std::chrono::duration_cast<std::chrono::hours>(now.time_since_epoch())
          .count() /
      24;
  long long y = 0;
  unsigned m = 0, d = 0;
  policy::civil_from_days(days, y, m, d);
  auto month = std::to_string(y * 12 + m - 1);
  auto fields = c.command({"HKEYS", "test:spend:route:/x:month:used"});
  REQUIRE(fields.ok());
  REQUIRE(fields.reply->elements.size() == 1);
  CHECK(fields.reply->elements[0].text == month);
  fields = c.command({"HKEYS", "test:spend:key:a:day:used"});
  REQUIRE(fields.ok());
  REQUIRE(fields.reply->elements.size() == 1);
  CHECK(fields.reply->elements[0].text == std::to_string(days));
}

TEST_CASE("shared limits: under many concurrent nodes the reservations in "
          "flight never pass the limit",
          "[redis]") {
  test_redis server;
  constexpr int nodes = 4;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> granted{0};
  for (int i = 0; i < nodes; ++i)
    threads.emplace_back([&, i] {
      redis_client c{server.config()};
      shared_limits l{c, 10s, "node-" + std::to_string(i)};
      for (int k = 0; k < 100; ++k) {
        auto o = l.reserve({tpm("route:chat:tpm", 10'000, 70)});
        if (o.answered && o.ok)
          granted += 70;
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(granted == 70 * (10'000 / 70)); // every fit taken, none beyond
  redis_client c{server.config()};
  shared_limits l{c, 10s, "reader"};
  CHECK(l.read(tpm("route:chat:tpm", 10'000, 0))->in_flight == granted.load());
}

TEST_CASE("shared limits: a node that stops leaks its reservations for one "
          "TTL at most, and renewed ones stay",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  shared_limits a{ca, 300ms, "node-a"}, b{cb, 300ms, "node-b"};
  using k = shared_limit::kind;
  auto two = [](uint64_t n) {
    return std::vector<shared_limit>{tpm("key:k2:tpm", 100, n),
                                     budget("key:k2:day", k::day, 100, n)};
  };
  auto kept = b.reserve(two(40));
  REQUIRE(kept.ok);
  REQUIRE(a.reserve(two(60)).ok); // then node a "dies": never settles
  CHECK_FALSE(b.reserve(two(1)).ok);
  std::vector<std::string> names{"key:k2:tpm", "key:k2:day"};
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    auto lapsed = b.renew({{kept.reservation, names}});
    REQUIRE(lapsed);
    CHECK(lapsed->empty());
  }
  // a's 60 lapsed in both; b's 40, renewed, are still in flight.
  CHECK(b.read(two(0)[0])->in_flight == 40);
  CHECK(b.read(two(0)[1])->in_flight == 40);
  CHECK(b.reserve(two(60)).ok);
  auto lapsed = b.renew({{"node-a:1", names}});
  REQUIRE(lapsed);
  CHECK(*lapsed == std::vector<std::string>{"node-a:1"});
}

TEST_CASE("shared limits: used tokens leave the window a period after their "
          "bucket, and a refusal says when",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits l{c, 10s, "node"};
  auto w = [](uint64_t n) { return tpm("key:k3:tpm", 100, n, 600ms); };
  auto r = l.reserve({w(80)}); // 10 ms buckets
  REQUIRE(r.ok);
  REQUIRE(l.settle(r.reservation, {w(80)}));
  auto refused = l.reserve({w(50)});
  REQUIRE(refused.answered);
  CHECK_FALSE(refused.ok);
  CHECK(refused.retry_after > duration::zero());
  CHECK(refused.retry_after <= 610ms);
  std::this_thread::sleep_for(refused.retry_after + 20ms);
  CHECK(l.read(w(0))->used == 0);
  CHECK(l.reserve({w(50)}).ok);
}

TEST_CASE("shared limits: the same answers as the one-process window for the "
          "same steps",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits shared{c, 10s, "node"};
  policy::token_window local{500, 60s};
  auto now = steady::now();
  auto w = [](uint64_t n) { return tpm("key:k4:tpm", 500, n); };
  std::vector<std::pair<std::string, uint64_t>> held;
  // Reserve, settle some with more or less than reserved, reserve again.
  for (uint64_t n : {100, 250, 200, 150, 501, 50, 60, 1}) {
    auto s = shared.reserve({w(n)});
    auto g = local.reserve(n, now);
    REQUIRE(s.answered);
    INFO("reserving " << n);
    CHECK(s.ok == g.ok);
    CHECK(s.too_large == g.too_large);
    CHECK(s.remaining[0] == g.remaining);
    if (g.ok)
      held.emplace_back(s.reservation, n);
    if (held.size() == 2) {
      for (auto& [id, amount] : held) {
        shared.settle(id, {w(amount + 10)});
        local.settle(amount, amount + 10, now);
      }
      held.clear();
    }
  }
  CHECK(shared.read(w(0))->used == local.used(now));
  CHECK(shared.read(w(0))->in_flight == local.in_flight());
}

TEST_CASE("shared limits: a full limit's counter stays bounded, however much "
          "calls report",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits l{c, 10s, "node"};
  auto big = [](uint64_t n) {
    return budget("key:k6:month", shared_limit::kind::month,
                  shared_limits::max_amount, n);
  };
  for (int i = 0; i < 20; ++i) {
    auto r = l.reserve({big(1)});
    REQUIRE(r.answered);
    REQUIRE(l.settle(r.reservation.empty() ? "none" : r.reservation,
                     {big(UINT64_MAX)}));
  }
  auto n = l.read(big(0));
  REQUIRE(n);
  CHECK(n->used >= shared_limits::max_amount);
  CHECK(n->used <= 2 * shared_limits::max_amount);
}

TEST_CASE("shared limits: nonsense settings are refused with their field, "
          "and Redis down is an answer of its own",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  CHECK_THROWS_WITH((shared_limits{c, 99ms, "n"}),
                    Catch::StartsWith("reservation_ttl:"));
  shared_limits l{c, 1s, "n"};
  CHECK_THROWS_WITH(l.reserve({tpm("x", 0, 1)}), Catch::StartsWith("limits:"));
  CHECK_THROWS_WITH(l.reserve({tpm("x", shared_limits::max_amount + 1, 1)}),
                    Catch::StartsWith("limits:"));
  CHECK_THROWS_WITH(l.reserve({tpm("x", 10, 1, 59ms)}),
                    Catch::StartsWith("limits:"));
  server.stop();
  auto o = l.reserve({tpm("x", 10, 1)});
  CHECK_FALSE(o.answered);
  CHECK_FALSE(o.error.empty());
  CHECK_FALSE(l.read(tpm("x", 10, 0)));
  CHECK_FALSE(l.settle("n:1", {tpm("x", 10, 1)}));
}

TEST_CASE("shared limits: an amount of 0 reserves, settles and lapses like "
          "any other (a free model under a budget, an empty request)",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits l{c, 200ms, "node"};
  using k = shared_limit::kind;
  auto limits = [](uint64_t tokens, uint64_t money) {
    return std::vector<shared_limit>{tpm("key:z:tpm", 100, tokens),
                                     budget("key:z:day", k::day, 50, money)};
  };
  auto r = l.reserve(limits(0, 0));
  REQUIRE(r.ok);
  // Settled with what it used: both limits count it, once.
  REQUIRE(l.settle(r.reservation, limits(7, 0)));
  CHECK(l.read(limits(0, 0)[0])->used == 7);
  CHECK(l.read(limits(0, 0)[0])->in_flight == 0);
  CHECK(l.read(limits(0, 0)[1])->in_flight == 0);
  // One that lapses (its node died) is dropped by the next script.
  REQUIRE(l.reserve(limits(0, 0)).ok);
  std::this_thread::sleep_for(250ms);
  auto next = l.reserve(limits(10, 5));
  REQUIRE(next.answered);
  CHECK(next.ok);
  CHECK(l.read(limits(0, 0)[0])->in_flight == 10);
}

TEST_CASE("shared limits: a renewal touches only each reservation's own "
          "limits",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  shared_limits l{c, 300ms, "node"};
  auto a = l.reserve({tpm("key:r1:tpm", 100, 10)});
  auto b = l.reserve({tpm("key:r2:tpm", 100, 20)});
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(100ms);
    // b is named under a's limit only: not renewed in its own.
    auto lapsed = l.renew(
        {{a.reservation, {"key:r1:tpm"}}, {b.reservation, {"key:r1:tpm"}}});
    REQUIRE(lapsed);
    CHECK(*lapsed == std::vector<std::string>{b.reservation});
  }
  CHECK(l.read(tpm("key:r1:tpm", 100, 0))->in_flight == 10);
  CHECK(l.read(tpm("key:r2:tpm", 100, 0))->in_flight == 0);
}
