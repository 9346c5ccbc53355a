// A source's rate quota: a token bucket read at the time it is given.

#include "sluice/runtime/policy/source/token_bucket.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::t0;

TEST_CASE("a token bucket allows its burst, then its rate") {
  token_bucket b{{2.0, 3}, t0}; // 2 per second, bursts of 3
  CHECK(b.try_take(t0));
  CHECK(b.try_take(t0));
  CHECK(b.try_take(t0));
  CHECK_FALSE(b.try_take(t0));
  auto next = b.next_token(t0);
  CHECK(next > t0 + 499ms);
  CHECK(next <= t0 + 501ms);
  CHECK_FALSE(b.try_take(t0 + 400ms));
  CHECK(b.try_take(next));
  CHECK_FALSE(b.try_take(next));
  // Idle for a long time: refills to the burst, never beyond.
  for (int i = 0; i < 3; ++i)
    CHECK(b.try_take(t0 + 1h));
  CHECK_FALSE(b.try_take(t0 + 1h));
}

TEST_CASE("nonsense quotas are refused, naming the field") {
  CHECK_THROWS_WITH(validate(quota_config{0.0, 1}),
                    Catch::StartsWith("rate_per_s:"));
  CHECK_THROWS_WITH(validate(quota_config{1.0, 0}),
                    Catch::StartsWith("burst:"));
}

TEST_CASE("a token bucket says what is left and when it is full again") {
  token_bucket b{{2.0, 4}, t0}; // 2 per second, bursts of 4
  CHECK(b.available(t0) == 4);
  CHECK(b.until_full(t0) == duration::zero());
  CHECK(b.try_take(t0));
  CHECK(b.try_take(t0));
  CHECK(b.try_take(t0));
  CHECK(b.available(t0) == 1);
  CHECK(b.until_full(t0) == duration{1500ms});
  CHECK(b.available(t0 + 500ms) == 2);
  CHECK(b.until_full(t0 + 1500ms) == duration::zero());
  CHECK(b.burst() == 4);
}
