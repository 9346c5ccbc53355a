// The governor's pure policies: stall clock and verdict, backoff, AIMD, call
// policy validation (SPEC §3).

#include <chrono>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/aimd.hpp"
#include "sluice/runtime/policy/backoff.hpp"
#include "sluice/runtime/policy/call_policy.hpp"
#include "sluice/runtime/policy/stall_clock.hpp"
#include "sluice/runtime/policy/token_bucket.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;

namespace {

const time_point t0 = time_point{} + 1h;

} // namespace

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

TEST_CASE("a 429 spends the retry budget only where the kind says so, "
          "every other outcome always") {
  call_policy chat; // 429 is load
  call_policy embeddings;
  embeddings.rate_limit_spends_retry = true;
  CHECK_FALSE(spends_retry(chat, outcome_kind::rate_limited));
  CHECK(spends_retry(embeddings, outcome_kind::rate_limited));
  for (auto k : {outcome_kind::ok, outcome_kind::transient,
                 outcome_kind::timeout, outcome_kind::permanent}) {
    INFO(to_string(k));
    CHECK(spends_retry(chat, k));
    CHECK(spends_retry(embeddings, k));
  }
}

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

TEST_CASE("AIMD shrinks on drops and recovers on successes, within bounds") {
  aimd_config c;
  c.initial = 16;
  c.min = 2;
  c.max = 20;
  c.decrease_ratio = 0.5;
  aimd_limit l{c};
  l.on_drop();
  CHECK(l.limit() == 8);
  for (int i = 0; i < 10; ++i)
    l.on_drop();
  CHECK(l.limit() == 2); // never below min
  for (int i = 0; i < 100; ++i)
    l.on_success(l.limit());
  CHECK(l.limit() == 20); // never above max
}

TEST_CASE("AIMD grows only while the source is well used") {
  aimd_config c;
  c.initial = 10;
  aimd_limit l{c};
  l.on_success(2); // 2 of 10 in flight: proves nothing about 11
  CHECK(l.limit() == 10);
  l.on_success(5);
  CHECK(l.limit() == 11);
}

TEST_CASE("nonsense AIMD and call policies are refused, naming the field") {
  auto refusal = [](auto&& cfg) -> std::string {
    try {
      validate(cfg);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  aimd_config a;
  a.decrease_ratio = 1.0;
  CHECK(refusal(a).rfind("decrease_ratio:", 0) == 0);
  a = {};
  a.min = 0;
  CHECK(refusal(a).rfind("min:", 0) == 0);
  a = {};
  a.initial = 1000;
  CHECK(refusal(a).rfind("initial:", 0) == 0);

  call_policy p;
  CHECK(refusal(p).empty());
  p.max_attempts = 0;
  CHECK(refusal(p).rfind("max_attempts:", 0) == 0);
  p = {};
  p.stall_window = -1s;
  CHECK(refusal(p).rfind("stall_window:", 0) == 0);
  p = {};
  p.backoff.jitter = 2;
  CHECK(refusal(p).rfind("backoff_jitter:", 0) == 0);
  p = {};
  p.ttft_timeout = 600s; // longer than the 300 s stall window
  CHECK(refusal(p).rfind("stall_window:", 0) == 0);
  p = {};
  p.poll_interval = 0s;
  CHECK(refusal(p).rfind("poll_interval:", 0) == 0);
  p = {};
  p.max_retry_after = 0s;
  CHECK(refusal(p).rfind("max_retry_after:", 0) == 0);
  p = {};
  p.max_retry_after = max_retry_after_limit + 1s;
  CHECK(refusal(p).rfind("max_retry_after:", 0) == 0);
  p = {};
  p.max_retry_after = max_retry_after_limit;
  CHECK(refusal(p).empty());
  p = {};
  p.max_attempts = max_attempts_limit + 1;
  CHECK(refusal(p).rfind("max_attempts:", 0) == 0);
  p = {};
  p.stall_window = duration_limit + 1s;
  CHECK(refusal(p).rfind("stall_window:", 0) == 0);
  p = {};
  p.backoff.cap = duration_limit + 1s;
  CHECK(refusal(p).rfind("backoff_cap:", 0) == 0);
  p = {};
  p.attempt_timeout = duration_limit + 1s;
  CHECK(refusal(p).rfind("attempt_timeout:", 0) == 0);
}

TEST_CASE("a Retry-After longer than the stall budget left or than "
          "max_retry_after is too long to sleep out (SPEC 7)") {
  call_policy p;
  p.stall_window = 5s;
  p.max_retry_after = 60s;
  // The seed's review case: 86400 s against a 5 s window.
  CHECK(retry_after_too_long(p, 86400s, 0s));
  // Within both bounds: honoured, up to and including the budget left.
  CHECK_FALSE(retry_after_too_long(p, 4s, 0s));
  CHECK_FALSE(retry_after_too_long(p, 5s, 0s));
  CHECK(retry_after_too_long(p, 5s + 1ms, 0s));
  // The budget left shrinks as the call stalls; past the window it is none.
  CHECK_FALSE(retry_after_too_long(p, 2s, 3s));
  CHECK(retry_after_too_long(p, 2s + 1ms, 3s));
  CHECK(retry_after_too_long(p, 1ms, 7s));
  CHECK_FALSE(retry_after_too_long(p, 0s, 7s));
  // max_retry_after binds when the window is longer.
  p.stall_window = 300s;
  CHECK_FALSE(retry_after_too_long(p, 60s, 0s));
  CHECK(retry_after_too_long(p, 61s, 0s));
  // Saturated hints are too long for any valid policy.
  p.max_retry_after = max_retry_after_limit;
  p.stall_window = duration_limit;
  CHECK(retry_after_too_long(p, std::chrono::hours{24 * 365}, 0s));
}

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
