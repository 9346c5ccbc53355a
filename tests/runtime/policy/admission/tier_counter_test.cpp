#include "sluice/runtime/policy/admission/tier_counter.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using sluice::policy::tier_counter;

TEST_CASE("tier_counter takes permits up to its cap and no further") {
  tier_counter c{2};
  CHECK(c.try_acquire());
  CHECK(c.try_acquire());
  CHECK_FALSE(c.try_acquire());
  CHECK(c.load().in_use == 2);
  CHECK_FALSE(c.release()); // nobody queued: no wakeup needed
  CHECK(c.try_acquire());
}

TEST_CASE("tier_counter closes the fast path while waiters are queued") {
  tier_counter c{1};
  REQUIRE(c.try_acquire());
  c.add_waiter();
  // The permit comes back, but the queued waiter must get it, not a newcomer.
  CHECK(c.release());
  CHECK_FALSE(c.try_acquire());
  CHECK(c.try_grant_waiter());
  CHECK(c.load().in_use == 1);
  CHECK(c.load().waiting == 0);
}

TEST_CASE("tier_counter grants a waiter only when a permit is free") {
  tier_counter c{1};
  REQUIRE(c.try_acquire());
  c.add_waiter();
  CHECK_FALSE(c.try_grant_waiter());
  c.remove_waiter();
  CHECK(c.load().waiting == 0);
  CHECK_FALSE(c.try_grant_waiter()); // no waiter registered
}

TEST_CASE("tier_counter never goes below zero") {
  tier_counter c{3};
  CHECK_FALSE(c.release());
  c.remove_waiter();
  CHECK(c.load().in_use == 0);
  CHECK(c.load().waiting == 0);
}

TEST_CASE("tier_counter refuses a cap of zero or beyond 2^31 - 1") {
  CHECK_THROWS_AS(tier_counter{0}, std::invalid_argument);
  CHECK_THROWS_AS(tier_counter{tier_counter::max_cap + 1},
                  std::invalid_argument);
  CHECK(tier_counter{tier_counter::max_cap}.cap() == tier_counter::max_cap);
}

TEST_CASE("tier_counter permit ids are never reused") {
  tier_counter c{1};
  auto a = c.next_permit_id();
  auto b = c.next_permit_id();
  CHECK(a != b);
}

TEST_CASE("tier_counter holds its cap under concurrent threads") {
  constexpr uint32_t cap = 5;
  tier_counter c{cap};
  std::atomic<int> holders{0};
  std::atomic<int> max_seen{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        if (!c.try_acquire())
          continue;
        auto now = holders.fetch_add(1) + 1;
        if (now > static_cast<int>(cap))
          over = true;
        auto prev = max_seen.load();
        while (now > prev && !max_seen.compare_exchange_weak(prev, now)) {
        }
        holders.fetch_sub(1);
        c.release();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK_FALSE(over);
  CHECK(max_seen <= static_cast<int>(cap));
  CHECK(c.load().in_use == 0);
}
