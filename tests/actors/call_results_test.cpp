// The results a governor ends a call with, built without an actor.

#include "sluice/actors/call_results.hpp"

#include <chrono>

#include <catch2/catch.hpp>

using namespace sluice;
using namespace std::chrono_literals;
using policy::outcome_kind;

namespace {

const time_point t0 = time_point{} + 1h;

source_reply reply_of(outcome_kind kind, int status, std::string body,
                      std::string content_type = {}) {
  source_reply r;
  r.kind = kind;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

} // namespace

TEST_CASE("call results: busy names the tier and waits the admission wait") {
  auto r = busy_result(tier_kind::session, 1500ms);
  CHECK(r.status == call_status::tool_busy);
  CHECK(r.busy_tier == tier_kind::session);
  CHECK(r.retry_after_s == Approx(1.5));
  CHECK(r.attempts.empty());
}

TEST_CASE("call results: a backend error retries after a poll interval") {
  auto r = backend_error_result(250ms);
  CHECK(r.status == call_status::governance_backend_error);
  CHECK(r.retry_after_s == Approx(0.25));
  CHECK_FALSE(r.busy_tier);
}

TEST_CASE("call results: exhausted carries its reason and retry time") {
  auto r = exhausted_result("stalled", 3s);
  CHECK(r.status == call_status::all_sources_exhausted);
  CHECK(r.reason == "stalled");
  CHECK(r.retry_after_s == Approx(3.0));
}

TEST_CASE("call results: exhausted retries when the soonest breaker opens") {
  CHECK(exhausted_retry_in(1s, std::nullopt, t0) == 1s);
  CHECK(exhausted_retry_in(1s, t0 + 7s, t0) == 7s);
  // A breaker instant already past (or now) is no hint: poll again.
  CHECK(exhausted_retry_in(1s, t0, t0) == 1s);
  CHECK(exhausted_retry_in(1s, t0 - 2s, t0) == 1s);
  // Shorter than a poll interval is taken too.
  CHECK(exhausted_retry_in(1s, t0 + 100ms, t0) == 100ms);
}

TEST_CASE("call results: an ok answer passes body, type and status on") {
  auto r = answer_result("a", reply_of(outcome_kind::ok, 200, "{}", "x/y"));
  CHECK(r.ok());
  CHECK(r.source == "a");
  CHECK(r.body == "{}");
  CHECK(r.content_type == "x/y");
  CHECK(r.upstream_status == 200);
  CHECK_FALSE(r.streamed);
  CHECK(r.reason.empty());
}

TEST_CASE("call results: a permanent answer is an upstream error, as is") {
  auto r = answer_result("b", reply_of(outcome_kind::permanent, 400,
                                       R"({"error":"bad"})", "text/plain"));
  CHECK(r.status == call_status::upstream_error);
  CHECK(r.source == "b");
  CHECK(r.body == R"({"error":"bad"})");
  CHECK(r.content_type == "text/plain");
  CHECK(r.upstream_status == 400);
  CHECK(r.reason.empty());
}

TEST_CASE("call results: a streamed ok end carries the source's last body") {
  auto r = streamed_result("s", reply_of(outcome_kind::ok, 200, "", "x/y"));
  CHECK(r.ok());
  CHECK(r.streamed);
  CHECK(r.source == "s");
  CHECK(r.upstream_status == 200);
  CHECK(r.body.empty());
  CHECK(r.content_type.empty());
  // A tool server's answer after the progress it streamed.
  auto t = streamed_result("s", reply_of(outcome_kind::ok, 200, "{}", "x/y"));
  CHECK(t.body == "{}");
}

TEST_CASE("call results: a failure after the first chunk is interrupted") {
  for (auto kind : {outcome_kind::transient, outcome_kind::timeout,
                    outcome_kind::rate_limited, outcome_kind::permanent}) {
    auto r = streamed_result("s", reply_of(kind, 502, "oops", "x/y"));
    CHECK(r.status == call_status::upstream_error);
    CHECK(r.reason == "stream_interrupted");
    CHECK(r.streamed);
    CHECK(r.body == "oops");
    CHECK(r.content_type.empty());
    CHECK(r.upstream_status == 502);
  }
}
