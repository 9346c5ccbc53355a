// A limit in tokens over a sliding period, with reservations (SPEC §12),
// in plain numbers.

#include "sluice/runtime/policy/spend/token_window.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::testing::refusal;
using sluice::testing::t0;

TEST_CASE("token window: reservations fit the limit with what was used, "
          "and settle with what the call used") {
  token_window w{1000, 60s}; // 1000 tokens per minute
  auto g = w.reserve(600, t0);
  CHECK(g.ok);
  CHECK(g.remaining == 400);
  CHECK(w.in_flight() == 600);
  // The second call's estimate does not fit beside the first's: refused,
  // and only the call in flight can make room (no wait says when).
  g = w.reserve(500, t0);
  CHECK_FALSE(g.ok);
  CHECK_FALSE(g.too_large);
  CHECK(g.remaining == 400);
  CHECK(g.retry_after == duration::zero());
  // The first used less than it reserved: the rest is free again.
  w.settle(600, 300, t0 + 1s);
  CHECK(w.in_flight() == 0);
  CHECK(w.used(t0 + 1s) == 300);
  CHECK(w.remaining(t0 + 1s) == 700);
  CHECK(w.reserve(500, t0 + 1s).ok);
}

TEST_CASE("token window: a refusal says when enough used tokens leave, and "
          "a token counts for at least the whole period") {
  token_window w{1000, 60s}; // buckets of 1 s
  w.settle(0, 400, t0);
  w.settle(0, 400, t0 + 10s);
  auto g = w.reserve(500, t0 + 20s); // 800 used: 300 must leave
  CHECK_FALSE(g.ok);
  CHECK(g.remaining == 200);
  // The first 400 leave a period after their bucket ends: t0 + 61 s.
  CHECK(g.retry_after == duration{41s});
  CHECK(w.used(t0 + 60s) == 800); // not one token early
  CHECK(w.used(t0 + 61s) == 400);
  CHECK(w.reserve(500, t0 + 61s).ok);
  CHECK(w.reset_after(t0 + 61s) == duration{10s});
  CHECK(w.used(t0 + 71s) == 0);
  CHECK(w.reset_after(t0 + 71s) == duration::zero());
}

TEST_CASE("token window: an estimate larger than the limit is too large, "
          "never retried") {
  token_window w{1000, 60s};
  auto g = w.reserve(1001, t0);
  CHECK_FALSE(g.ok);
  CHECK(g.too_large);
  CHECK(g.remaining == 1000);
  CHECK(w.in_flight() == 0);
  CHECK(w.reserve(1000, t0).ok); // exactly the limit fits
}

TEST_CASE("token window: the limit is passed only by what calls in flight "
          "used beyond their estimates") {
  token_window w{1000, 60s};
  // Ten calls of 100 each fill it; each then uses 150.
  for (int i = 0; i < 10; ++i)
    REQUIRE(w.reserve(100, t0).ok);
  CHECK_FALSE(w.reserve(1, t0).ok);
  for (int i = 0; i < 10; ++i)
    w.settle(100, 150, t0 + 1s);
  CHECK(w.used(t0 + 1s) == 1500); // over by the calls' 10 x 50
  CHECK(w.remaining(t0 + 1s) == 0);
  CHECK_FALSE(w.reserve(1, t0 + 2s).ok);
  // A call that never reached the upstream frees its reservation only.
  token_window v{100, 60s};
  REQUIRE(v.reserve(100, t0).ok);
  v.settle(100, 0, t0);
  CHECK(v.remaining(t0) == 100);
}

TEST_CASE("token window: many settles keep at most one bucket per width, "
          "and old ones fold later, never earlier") {
  token_window w{1'000'000, 60s};
  // 200 settles 100 ms apart over 20 s: 20 buckets of 1 s.
  for (int i = 0; i < 200; ++i)
    w.settle(0, 10, t0 + i * 100ms);
  CHECK(w.used(t0 + 20s) == 2000);
  CHECK(w.used(t0 + 61s) == 2000 - 10 * 10); // the first second's 10 left
  // Saturating sums: no wrap.
  token_window big{UINT64_MAX, 60s};
  big.settle(0, UINT64_MAX, t0);
  big.settle(0, UINT64_MAX, t0);
  CHECK(big.used(t0) == UINT64_MAX);
  CHECK(big.remaining(t0) == 0);
}

TEST_CASE("token window: a limit of 0 or a period under a bucket's width "
          "is refused, naming the field") {
  CHECK_THROWS_WITH((token_window{0, 60s}), Catch::StartsWith("limit:"));
  CHECK_THROWS_WITH((token_window{10, duration{10}}),
                    Catch::StartsWith("period:"));
}

TEST_CASE("token window: a new limit keeps what was used and reserved") {
  token_window w{1000, 60s};
  REQUIRE(w.reserve(300, t0).ok);
  w.settle(0, 500, t0);
  w.set_limit(900);
  CHECK(w.limit() == 900);
  CHECK(w.remaining(t0) == 100);
  CHECK_FALSE(w.reserve(101, t0).ok);
  w.set_limit(700); // below what is taken: nothing left, nothing lost
  CHECK(w.remaining(t0) == 0);
  CHECK(w.used(t0) == 500);
  CHECK(w.in_flight() == 300);
  CHECK_THROWS_WITH(w.set_limit(0), Catch::StartsWith("limit:"));
}
