// The retry budget's counts: a share of active calls with a floor, each
// call and each retry counted once, every count returned by its hold.

#include "sluice/runtime/policy/call/retry_budget.hpp"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace sluice::policy;

namespace {

std::shared_ptr<retry_budget> make_budget(double percent, uint32_t floor) {
  retry_budget_config cfg;
  cfg.percent = percent;
  cfg.min_concurrency = floor;
  return std::make_shared<retry_budget>(cfg);
}

} // namespace

TEST_CASE("retry budget: the floor holds on a quiet route, the share on a "
          "busy one") {
  auto b = make_budget(20, 3);
  CHECK(b->allowed(0) == 3);
  CHECK(b->allowed(10) == 3); // 20 % of 10 is 2: the floor wins
  CHECK(b->allowed(20) == 4);
  CHECK(b->allowed(99) == 19); // rounded down
  CHECK(b->allowed(100) == 20);
  auto floor_only = make_budget(0, 1);
  CHECK(floor_only->allowed(1000) == 1);
  auto all = make_budget(100, 1);
  CHECK(all->allowed(7) == 7);
}

TEST_CASE("retry budget: retries beyond the share are refused until one "
          "ends") {
  auto b = make_budget(20, 3);
  std::vector<retry_budget::hold> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(b->call_started());
  CHECK(b->load().active == 20);
  std::vector<retry_budget::hold> retries;
  for (int i = 0; i < 4; ++i) {
    retries.push_back(b->try_retry());
    CHECK(retries.back());
  }
  CHECK_FALSE(b->try_retry());
  CHECK(b->load().retrying == 4);
  CHECK(b->load().refused == 1);
  retries.pop_back(); // one retry ended
  auto again = b->try_retry();
  CHECK(again);
  // Calls ending shrink the share: 15 active allow the floor, 3.
  calls.resize(15);
  CHECK(b->load().active == 15);
  retries.pop_back();
  CHECK(b->load().retrying == 3);
  CHECK_FALSE(b->try_retry());
}

TEST_CASE("retry budget: holds return their count once - moved, reset or "
          "destroyed") {
  auto b = make_budget(0, 1);
  {
    auto call = b->call_started();
    auto r = b->try_retry();
    REQUIRE(r);
    retry_budget::hold moved = std::move(r);
    CHECK_FALSE(r);
    CHECK(b->load().retrying == 1);
    r.reset(); // empty: nothing to return
    CHECK(b->load().retrying == 1);
    moved.reset();
    moved.reset();
    CHECK(b->load().retrying == 0);
    auto r2 = b->try_retry();
    retry_budget::hold other = b->try_retry(); // refused: floor 1
    CHECK_FALSE(other);
    other = std::move(r2);
    CHECK(b->load().retrying == 1);
  }
  CHECK(b->load().active == 0);
  CHECK(b->load().retrying == 0);
}

TEST_CASE("retry budget: many threads never exceed the allowed retries") {
  auto b = make_budget(10, 2);
  std::vector<retry_budget::hold> calls;
  for (int i = 0; i < 50; ++i)
    calls.push_back(b->call_started());
  std::atomic<uint32_t> in_flight{0};
  std::atomic<uint32_t> worst{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        auto r = b->try_retry();
        if (!r)
          continue;
        auto now = ++in_flight;
        auto seen = worst.load();
        while (now > seen && !worst.compare_exchange_weak(seen, now)) {
        }
        --in_flight;
      }
    });
  for (auto& t : threads)
    t.join();
  CHECK(worst.load() <= 5); // 10 % of 50
  CHECK(b->load().retrying == 0);
}

TEST_CASE("retry budget settings are checked") {
  retry_budget_config cfg;
  cfg.percent = 101;
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("percent"));
  cfg.percent = -1;
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("percent"));
  cfg.percent = std::nan("");
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("percent"));
  cfg.percent = 20;
  CHECK_NOTHROW(validate(cfg));
  cfg.min_concurrency = 0; // a quiet route could never retry
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("min_concurrency"));
}
