#include "sluice/runtime/policy/source/http_outcome.hpp"

#include <chrono>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice::policy;

namespace {

// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
const auto rfc_date = std::chrono::system_clock::from_time_t(784111777);

} // namespace

TEST_CASE("HTTP statuses map to outcome classes") {
  CHECK(classify_http_status(200) == outcome_kind::ok);
  CHECK(classify_http_status(204) == outcome_kind::ok);
  CHECK(classify_http_status(429) == outcome_kind::rate_limited);
  CHECK(classify_http_status(408) == outcome_kind::transient);
  CHECK(classify_http_status(500) == outcome_kind::transient);
  CHECK(classify_http_status(503) == outcome_kind::transient);
  CHECK(classify_http_status(400) == outcome_kind::permanent);
  CHECK(classify_http_status(401) == outcome_kind::permanent);
  CHECK(classify_http_status(404) == outcome_kind::permanent);
  CHECK(classify_http_status(302) == outcome_kind::permanent);
}

TEST_CASE("a source's status rules move statuses between classes") {
  status_rules rules;
  // No rules: the defaults, an empty 200 included.
  CHECK(rules.classify(404, 10) == outcome_kind::permanent);
  CHECK(rules.classify(200, 0) == outcome_kind::ok);
  rules.set(404, outcome_kind::transient);
  rules.set(503, outcome_kind::permanent);
  rules.set(529, outcome_kind::rate_limited);
  CHECK(rules.classify(404, 10) == outcome_kind::transient);
  CHECK(rules.classify(503, 10) == outcome_kind::permanent);
  CHECK(rules.classify(529, 0) == outcome_kind::rate_limited);
  // Others keep their class.
  CHECK(rules.classify(500, 10) == outcome_kind::transient);
  CHECK(rules.classify(400, 10) == outcome_kind::permanent);
  CHECK(rules.classify(200, 0) == outcome_kind::ok);
  rules.empty_2xx_transient = true;
  CHECK(rules.classify(200, 0) == outcome_kind::transient);
  CHECK(rules.classify(204, 0) == outcome_kind::transient);
  CHECK(rules.classify(200, 1) == outcome_kind::ok);
  CHECK(rules.classify(404, 0) == outcome_kind::transient);
}

TEST_CASE("status rules refuse 2xx, out-of-range statuses, ok and timeout "
          "as classes, and a status classed twice") {
  status_rules rules;
  auto refused = [&](int status, outcome_kind kind) {
    try {
      rules.set(status, kind);
    } catch (const std::invalid_argument& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  using Catch::Contains;
  CHECK_THAT(refused(200, outcome_kind::transient), Contains("not in [300"));
  CHECK_THAT(refused(299, outcome_kind::transient), Contains("not in [300"));
  CHECK_THAT(refused(600, outcome_kind::transient), Contains("not in [300"));
  CHECK_THAT(refused(-1, outcome_kind::transient), Contains("not in [300"));
  CHECK_THAT(refused(500, outcome_kind::ok), Contains("classed transient"));
  CHECK_THAT(refused(500, outcome_kind::timeout),
             Contains("classed transient"));
  CHECK(refused(500, outcome_kind::permanent).empty());
  CHECK_THAT(refused(500, outcome_kind::transient), Contains("classed twice"));
  CHECK(rules.overrides.size() == 1);
}

TEST_CASE("Retry-After as delta-seconds") {
  CHECK(parse_retry_after("120", rfc_date) == 120s);
  CHECK(parse_retry_after(" 0 ", rfc_date) == 0s);
  CHECK_FALSE(parse_retry_after("-5", rfc_date));
  CHECK_FALSE(parse_retry_after("soon", rfc_date));
  CHECK_FALSE(parse_retry_after("", rfc_date));
}

TEST_CASE("Retry-After as an HTTP-date in all three formats") {
  auto before = rfc_date - 30s;
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", before) == 30s);
  CHECK(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", before) == 30s);
  CHECK(parse_retry_after("Sun Nov  6 08:49:37 1994", before) == 30s);
  // A date in the past means "now", never a negative wait.
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", rfc_date + 1h) ==
        0s);
  CHECK_FALSE(parse_retry_after("Sun, 06 Nov 1994 08:49:37", before));
}

TEST_CASE("Retry-After: huge delta-seconds saturate, never overflow or wrap") {
  // Nine digits (about 31.7 years) and twenty digits (past int64) both read
  // as the saturated "very long", which no bound accepts.
  CHECK(parse_retry_after("999999999", rfc_date) == retry_after_saturation);
  CHECK(parse_retry_after("99999999999999999999", rfc_date) ==
        retry_after_saturation);
  CHECK(parse_retry_after(std::string(5000, '9'), rfc_date) ==
        retry_after_saturation);
  // Just below the saturation: taken as given.
  CHECK(parse_retry_after("86400", rfc_date) == 86400s);
  CHECK(parse_retry_after("00000000000000000000120", rfc_date) == 120s);
}

TEST_CASE("Retry-After: a date in year 9999 is very long, not \"retry now\"") {
  auto hint = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", rfc_date);
  REQUIRE(hint);
  CHECK(*hint == retry_after_saturation);
  // The same from today's clock (the overflow made it zero or negative).
  auto today = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT",
                                 std::chrono::system_clock::now());
  REQUIRE(today);
  CHECK(*today == retry_after_saturation);
  // Past dates, however far back, are zero.
  CHECK(parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", rfc_date) == 0s);
  CHECK(parse_retry_after("Mon, 01 Jan 0001 00:00:00 GMT", rfc_date) == 0s);
  // A near date keeps its sub-second precision.
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", rfc_date - 1500ms) ==
        1500ms);
}
