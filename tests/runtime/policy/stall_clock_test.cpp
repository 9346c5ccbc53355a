// The stall clock and the stall verdict (SPEC §3): which moments of a call
// are unproductive, and when the stall budget ends it.

#include "sluice/runtime/policy/stall_clock.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::t0;

TEST_CASE("stall clock: productive attempt time never counts as stalled") {
  stall_clock c{t0};
  c.begin_attempt(t0);
  CHECK(c.attempting());
  CHECK(c.stalled(t0 + 5000s) == 0s); // in progress: productive
  c.end_attempt(t0 + 10000s, false);
  CHECK_FALSE(c.attempting());
  CHECK(c.stalled(t0 + 10000s) == 0s);
  CHECK(c.productive() == 10000s);
}

TEST_CASE("stall clock: waiting between attempts counts as stalled") {
  stall_clock c{t0};
  c.begin_attempt(t0 + 5s);
  c.end_attempt(t0 + 305s, false);
  CHECK(c.stalled(t0 + 307s) == 7s);
}

TEST_CASE("stall clock: a refunded 429 attempt counts as stalled") {
  stall_clock c{t0};
  c.begin_attempt(t0);
  c.end_attempt(t0 + 300s, true);
  CHECK(c.stalled(t0 + 300s) == 300s);
  CHECK(c.productive() == 0s);
}

TEST_CASE("stall verdict: the four quadrants") {
  const duration w = 300s;
  // Only "both exceeded" stalls.
  CHECK(stall_verdict(301s, 301s, w));
  CHECK_FALSE(stall_verdict(301s, 10s, w));
  CHECK_FALSE(stall_verdict(10s, 301s, w));
  CHECK_FALSE(stall_verdict(10s, 10s, w));
  // A scope that never progressed (+inf) counts as exceeded.
  CHECK(stall_verdict(301s, std::nullopt, w));
  CHECK_FALSE(stall_verdict(299s, std::nullopt, w));
  // Exactly at the window is not over it.
  CHECK_FALSE(stall_verdict(300s, std::nullopt, w));
}

TEST_CASE("stall verdict: its local half alone decides whether the scope "
          "is asked") {
  const duration w = 300s;
  // The governor asks the backend only when the local half holds: whatever
  // the scope's age, a call below the window is not stalled.
  for (auto local : {0s, 299s, 300s, 301s, 900s}) {
    INFO(local.count());
    for (std::optional<duration> age :
         {std::optional<duration>{}, std::optional<duration>{10s},
          std::optional<duration>{301s}})
      if (!local_stall_exceeded(local, w))
        CHECK_FALSE(stall_verdict(local, age, w));
    CHECK(local_stall_exceeded(local, w) ==
          stall_verdict(local, std::nullopt, w));
  }
}
