// The delay before the next attempt and the no-runnable-source poll.

#include "sluice/runtime/policy/call/backoff.hpp"

#include <chrono>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;

TEST_CASE("backoff grows exponentially by max(fails, 1), capped") {
  backoff_config c{1s, 10s, 0.0};
  CHECK(backoff_delay(c, 0, 0.3) == 1s);
  CHECK(backoff_delay(c, 1, 0.3) == 1s);
  CHECK(backoff_delay(c, 2, 0.3) == 2s);
  CHECK(backoff_delay(c, 3, 0.3) == 4s);
  CHECK(backoff_delay(c, 5, 0.3) == 10s);
  CHECK(backoff_delay(c, 1000, 0.3) == 10s);
}

TEST_CASE("backoff jitter stays within [d * (1 - jitter), d]") {
  backoff_config c{4s, 60s, 0.5};
  CHECK(backoff_delay(c, 1, 0.0) == 4s);
  CHECK(backoff_delay(c, 1, 0.5) == 3s);
  CHECK(backoff_delay(c, 1, 0.999999) > 2s - 1ms);
}

TEST_CASE("a Retry-After hint raises the backoff, never lowers it") {
  backoff_config c{2s, 60s, 0.5};
  CHECK(backoff_delay(c, 1, 0.9, 30s) == 30s);
  CHECK(backoff_delay(c, 1, 0.0, 1s) == 2s);
}

TEST_CASE("poll delay is within [0.5p, 1.0p]") {
  CHECK(poll_delay(2s, 0.0) == 1s);
  CHECK(poll_delay(2s, 0.5) == 1500ms);
  CHECK(poll_delay(2s, 0.999999) < 2s);
}
