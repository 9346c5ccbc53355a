// A call kind's policy (SPEC §3): what spends the retry budget, which
// Retry-After hints are too long to sleep out, and the settings refused.

#include "sluice/runtime/policy/call/call_policy.hpp"
#include "sluice/runtime/policy/field_error.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::refusal;

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

TEST_CASE("nonsense call policies are refused, naming the field") {
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

TEST_CASE("a refused call policy is a field_error naming the field") {
  call_policy p;
  p.max_attempts = 0;
  try {
    validate(p);
    FAIL("accepted");
  } catch (const sluice::field_error& e) {
    CHECK(e.field() == "max_attempts");
    CHECK_FALSE(e.problem().empty());
  }
}

TEST_CASE("the client is told to wait no longer than the node would "
          "(max_retry_after), whatever the upstream's hint") {
  call_policy p;
  p.max_retry_after = 60s;
  CHECK(client_retry_after(p, 86400s * 365) == 60s);
  CHECK(client_retry_after(p, 61s) == 60s);
  CHECK(client_retry_after(p, 7s) == 7s);
  CHECK(client_retry_after(p, -1s) == 0s);
}
