// The node's answers: every error status from the one errc table, and the
// access log's `error` from the same call_status -> errc mapping.

#include <string>

#include <boost/beast/http/field.hpp>
#include <catch2/catch.hpp>

#include "sluice/runtime/node/responses.hpp"

using namespace sluice;
using namespace sluice::node;
namespace http = boost::beast::http;

namespace {

constexpr errc every_errc[] = {
    errc::tool_busy,
    errc::all_sources_exhausted,
    errc::governance_backend_error,
    errc::upstream_error,
    errc::bad_request,
    errc::not_found,
    errc::method_not_allowed,
    errc::payload_too_large,
    errc::headers_too_large,
    errc::overloaded,
    errc::shutting_down,
    errc::model_not_found,
    errc::unauthorized,
    errc::rate_limited,
    errc::forbidden,
    errc::config_rejected,
};

constexpr call_status every_failure[] = {
    call_status::tool_busy,      call_status::all_sources_exhausted,
    call_status::upstream_error, call_status::governance_backend_error,
    call_status::cancelled,
};

json body_of(const response& res) {
  return json::parse(res.body());
}

} // namespace

TEST_CASE("responses: every error's status comes from describe()") {
  for (auto code : every_errc) {
    INFO(to_string(code));
    auto res = error_response(code, "why", true, 11);
    CHECK(res.result_int() ==
          static_cast<unsigned>(describe(code).http_status));
    CHECK(body_of(res)["error"]["code"] == std::string{describe(code).name});
    // A 503 says when to come back; others do not unless told.
    CHECK((res.count(http::field::retry_after) > 0) ==
          (describe(code).http_status == 503));
  }
}

TEST_CASE("responses: the key's rate limit is a 429 from the table, with its "
          "Retry-After") {
  auto body = error_body(errc::rate_limited, "Rate limit reached");
  body["error"]["retry_after_s"] = 3;
  auto res = error_response_from(errc::rate_limited, body, true, 11, 2.2);
  CHECK(res.result_int() == 429);
  CHECK(res[http::field::retry_after] == "3");
  CHECK(body_of(res)["error"]["code"] == "rate_limit_exceeded");
  CHECK(body_of(res)["error"]["retry_after_s"] == 3);
}

TEST_CASE("responses: a failed call is answered with the status of its "
          "error, from the table") {
  for (auto s : every_failure) {
    INFO(to_string(s));
    call_result r;
    r.status = s;
    auto code = error_of(s);
    REQUIRE(code);
    auto res = render(r, true, 11);
    // An upstream error without a plausible status of its own is a 502.
    CHECK(res.result_int() ==
          static_cast<unsigned>(describe(*code).http_status));
    if (s != call_status::upstream_error)
      CHECK(body_of(res)["error"]["code"] == std::string{describe(*code).name});
  }
  CHECK_FALSE(error_of(call_status::ok));
  call_result passed;
  passed.status = call_status::upstream_error;
  passed.upstream_status = 404;
  CHECK(render(passed, true, 11).result_int() == 404);
}

TEST_CASE("responses: the access log's error is the answer's code, with the "
          "reason") {
  for (auto s : every_failure) {
    if (s == call_status::cancelled)
      continue;
    INFO(to_string(s));
    call_result r;
    r.status = s;
    CHECK(access_error(r) == describe(*error_of(s)).name);
    r.reason = "stalled";
    CHECK(access_error(r) ==
          std::string{describe(*error_of(s)).name} + "/stalled");
  }
  call_result ok;
  CHECK(access_error(ok).empty());
  // Its client left: nobody is answered, the line says so.
  call_result cancelled;
  cancelled.status = call_status::cancelled;
  CHECK(access_error(cancelled) == "cancelled");
}

TEST_CASE("a client's text echoed in a message is cut") {
  CHECK(echo_text("/v1/x") == "/v1/x");
  std::string at_limit(max_echoed_path_bytes, 'a');
  CHECK(echo_text(at_limit) == at_limit);
  auto cut = echo_text(at_limit + "b");
  CHECK(cut == at_limit + "...");
}
