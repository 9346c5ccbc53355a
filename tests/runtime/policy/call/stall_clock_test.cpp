// The stall clock and the stall verdict (SPEC §3): which moments of a call
// are unproductive, and when the stall budget ends it.

#include "sluice/runtime/policy/call/stall_clock.hpp"

#include <algorithm>
#include <chrono>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::t0;

namespace {
using attempt_ids = stall_clock::attempt_id[3];
} // namespace

TEST_CASE("stall clock: productive attempt time never counts as stalled") {
  stall_clock c{t0};
  auto id = c.begin_attempt(t0);
  CHECK(c.attempting());
  CHECK(c.stalled(t0 + 5000s) == 0s); // in progress: productive
  c.end_attempt(id, t0 + 10000s, false);
  CHECK_FALSE(c.attempting());
  CHECK(c.stalled(t0 + 10000s) == 0s);
  CHECK(c.productive() == 10000s);
}

TEST_CASE("stall clock: waiting between attempts counts as stalled") {
  stall_clock c{t0};
  auto id = c.begin_attempt(t0 + 5s);
  c.end_attempt(id, t0 + 305s, false);
  CHECK(c.stalled(t0 + 307s) == 7s);
}

TEST_CASE("stall clock: a refunded 429 attempt counts as stalled") {
  stall_clock c{t0};
  auto id = c.begin_attempt(t0);
  c.end_attempt(id, t0 + 300s, true);
  CHECK(c.stalled(t0 + 300s) == 300s);
  CHECK(c.productive() == 0s);
}

TEST_CASE("stall clock: overlapping attempts are productive once - the "
          "union of their intervals") {
  stall_clock c{t0};
  auto a = c.begin_attempt(t0);       // [0, 5]
  auto b = c.begin_attempt(t0 + 2s);  // [2, 6] (a hedge)
  CHECK(c.stalled(t0 + 4s) == 0s);
  c.end_attempt(a, t0 + 5s, false);
  CHECK(c.attempting());
  CHECK(c.stalled(t0 + 5500ms) == 0s);
  c.end_attempt(b, t0 + 6s, false);
  CHECK(c.productive() == 6s); // not 5 + 4
  CHECK(c.stalled(t0 + 6s) == 0s);
  CHECK(c.stalled(t0 + 8s) == 2s);
  // Nested: [10, 20] around [12, 14].
  auto outer = c.begin_attempt(t0 + 10s);
  auto inner = c.begin_attempt(t0 + 12s);
  c.end_attempt(inner, t0 + 14s, false);
  CHECK(c.stalled(t0 + 16s) == 4s); // the gap [6, 10]
  c.end_attempt(outer, t0 + 20s, false);
  CHECK(c.productive() == 16s);
  CHECK(c.stalled(t0 + 20s) == 4s);
}

TEST_CASE("stall clock: a refunded 429 beside a productive attempt refunds "
          "only the time nothing else covered") {
  stall_clock c{t0};
  auto a = c.begin_attempt(t0);      // [0, 10] productive
  auto b = c.begin_attempt(t0 + 4s); // [4, 12] a 429: refunded
  c.end_attempt(a, t0 + 10s, false);
  c.end_attempt(b, t0 + 12s, true);
  CHECK(c.productive() == 10s);
  CHECK(c.stalled(t0 + 12s) == 2s); // [10, 12] was the 429's alone
  // The refunded one ending first: still open time of the other counts.
  stall_clock d{t0};
  auto x = d.begin_attempt(t0);      // a 429, [0, 3]
  auto y = d.begin_attempt(t0 + 1s); // [1, 5]
  d.end_attempt(x, t0 + 3s, true);
  CHECK(d.stalled(t0 + 3s) == 1s); // [0, 1]
  d.end_attempt(y, t0 + 5s, false);
  CHECK(d.productive() == 4s);
  CHECK(d.stalled(t0 + 5s) == 1s);
  // An unknown id and a second end change nothing.
  d.end_attempt(y, t0 + 9s, false);
  d.end_attempt(12345, t0 + 9s, false);
  CHECK(d.productive() == 4s);
}

TEST_CASE("stall clock: three attempts open at once, ending in any order") {
  // The first attempt is kept apart from the others (hedges): each order of
  // ending must give the same union [0, 9].
  for (int order = 0; order < 6; ++order) {
    stall_clock c{t0};
    attempt_ids ids{c.begin_attempt(t0), c.begin_attempt(t0 + 1s),
                    c.begin_attempt(t0 + 2s)};
    const time_point ends[] = {t0 + 7s, t0 + 8s, t0 + 9s};
    int perm[3] = {0, 1, 2};
    for (int k = 0; k < order; ++k)
      std::next_permutation(perm, perm + 3);
    for (int k = 0; k < 3; ++k) {
      CHECK(c.attempting());
      CHECK(c.stalled(ends[k]) == 0s);
      c.end_attempt(ids[perm[k]], ends[k], false);
    }
    CHECK_FALSE(c.attempting());
    CHECK(c.productive() == 9s);
    CHECK(c.stalled(t0 + 10s) == 1s);
    // A new attempt after all ended is the first again.
    auto again = c.begin_attempt(t0 + 10s);
    CHECK(c.attempting());
    c.end_attempt(again, t0 + 12s, false);
    CHECK(c.productive() == 11s);
  }
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
