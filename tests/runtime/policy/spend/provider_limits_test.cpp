// A provider's own rate-limit headers (SPEC §12): OpenAI's and Anthropic's,
// read into limits, and the headroom that holds a call back instead of
// sending it into a 429.

#include "sluice/runtime/policy/spend/provider_limits.hpp"

#include <chrono>
#include <string>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"
#include "sluice/runtime/policy/spend/provider_headroom.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::testing::t0;
using sys = std::chrono::system_clock;

namespace {

// 2026-12-05T07:00:00Z
const sys::time_point wall = sys::time_point{} + 1'796'454'000s;

provider_limits
read(std::initializer_list<std::pair<const char*, const char*>> headers) {
  provider_limits l;
  for (auto& [n, v] : headers)
    read_limit_header(l, n, v, wall);
  return l;
}

} // namespace

TEST_CASE("provider limits: counts are digits only and saturate") {
  CHECK(parse_limit_count("0") == 0u);
  CHECK(parse_limit_count("149984") == 149984u);
  CHECK(parse_limit_count("99999999999999999999999999999") ==
        provider_count_saturation);
  CHECK_FALSE(parse_limit_count(""));
  CHECK_FALSE(parse_limit_count("-1"));
  CHECK_FALSE(parse_limit_count(" 5"));
  CHECK_FALSE(parse_limit_count("5.0"));
  CHECK_FALSE(parse_limit_count("1e6"));
}

TEST_CASE("provider limits: OpenAI's reset durations") {
  CHECK(parse_reset_duration("1s") == duration{1s});
  CHECK(parse_reset_duration("6m0s") == duration{6min});
  CHECK(parse_reset_duration("20ms") == duration{20ms});
  CHECK(parse_reset_duration("1h2m3.5s") == duration{1h + 2min + 3500ms});
  CHECK(parse_reset_duration("0.5s") == duration{500ms});
  CHECK(parse_reset_duration("0s") == duration::zero());
  CHECK(parse_reset_duration("30") == duration{30s}); // bare: seconds
  CHECK(parse_reset_duration("250us") == duration{250us});
  // A header of 10^9 seconds, or more digits than any clock holds.
  CHECK(parse_reset_duration("1000000000s") == provider_reset_saturation);
  CHECK(parse_reset_duration(std::string(400, '9') + "h") ==
        provider_reset_saturation);
  for (auto bad : {"", "s", "-1s", "1x", "1m30", "1 s", "1..5s", ".s", "h1"})
    CHECK_FALSE(parse_reset_duration(bad));
}

TEST_CASE("provider limits: Anthropic's reset instants, from now") {
  CHECK(parse_reset_instant("2026-12-05T07:00:30Z", wall) == duration{30s});
  CHECK(parse_reset_instant("2026-12-05T08:00:30+01:00", wall) ==
        duration{30s});
  CHECK(parse_reset_instant("2026-12-05T06:59:59.5-00:00", wall) ==
        duration::zero()); // past
  CHECK(parse_reset_instant("2026-12-05T07:00:00.25Z", wall) ==
        duration{250ms});
  CHECK(parse_reset_instant("9999-12-31T23:59:59Z", wall) ==
        provider_reset_saturation);
  for (auto bad :
       {"", "2026-12-05", "2026-12-05T07:00:30", "2026-13-05T07:00:30Z",
        "2026-12-05T25:00:30Z", "2026-12-05T07:00:30Zjunk",
        "2026-12-05T07:00:30+1:00", "tomorrow"})
    CHECK_FALSE(parse_reset_instant(bad, wall));
}

TEST_CASE("provider limits: OpenAI's headers fill the requests and tokens "
          "lanes, in any case, and others are ignored") {
  auto l = read({{"x-ratelimit-limit-requests", "500"},
                 {"X-RateLimit-Remaining-Requests", "499"},
                 {"x-ratelimit-reset-requests", "120ms"},
                 {"x-ratelimit-limit-tokens", "30000"},
                 {"x-ratelimit-remaining-tokens", "29950"},
                 {"x-ratelimit-reset-tokens", "100ms"},
                 {"x-ratelimit-remaining-bananas", "3"},
                 {"content-type", "application/json"}});
  CHECK(l.requests.limit == 500u);
  CHECK(l.requests.remaining == 499u);
  CHECK(l.requests.reset == duration{120ms});
  CHECK(l.tokens.limit == 30000u);
  CHECK(l.tokens.remaining == 29950u);
  CHECK(l.tokens.reset == duration{100ms});
  CHECK(l.token_lane().remaining == 29950u);
  CHECK(read({{"x-ratelimit-remaining-tokens", "lots"}}).empty());
  CHECK(read({{"server", "x"}}).empty());
}

TEST_CASE("provider limits: Anthropic's input and output token lanes - the "
          "tightest is the one a call must fit") {
  auto l =
      read({{"anthropic-ratelimit-requests-remaining", "49"},
            {"anthropic-ratelimit-requests-reset", "2026-12-05T07:00:01Z"},
            {"anthropic-ratelimit-input-tokens-limit", "40000"},
            {"anthropic-ratelimit-input-tokens-remaining", "1200"},
            {"anthropic-ratelimit-input-tokens-reset", "2026-12-05T07:00:20Z"},
            {"anthropic-ratelimit-output-tokens-remaining", "8000"},
            {"anthropic-ratelimit-output-tokens-reset", "2026-12-05T07:00:05Z"},
            {"anthropic-ratelimit-tokens-frobs", "1"}});
  CHECK(l.requests.remaining == 49u);
  CHECK(l.requests.reset == duration{1s});
  auto t = l.token_lane();
  CHECK(t.remaining == 1200u);
  CHECK(t.reset == duration{20s});
  CHECK(t.limit == 40000u);
}

TEST_CASE("provider headroom: a call the upstream cannot cover waits for "
          "the reset, every call sent counts against what is left") {
  provider_headroom h;
  CHECK(h.check(1000, t0).go); // nothing known: go
  provider_limits l;
  l.tokens = {30000, 2500, 10s};
  l.requests = {100, 2, 60s};
  h.answered(0, l, t0);
  CHECK(h.tokens_left(t0) == 2500u);
  CHECK(h.take(2000, t0).go);
  CHECK(h.tokens_left(t0 + 1s) == 500u);
  CHECK(h.requests_left(t0 + 1s) == 1u);
  auto v = h.check(1000, t0 + 1s); // 500 left: wait for the tokens' reset
  CHECK_FALSE(v.go);
  CHECK(v.not_before == t0 + 10s);
  CHECK(h.take(500, t0 + 1s).go);
  // No request left either: the later of the two resets.
  CHECK(h.requests_left(t0 + 2s) == 0u);
  v = h.check(10, t0 + 2s);
  CHECK_FALSE(v.go);
  CHECK(v.not_before == t0 + 60s);
  // Past a reset, that lane is unknown until the next answer.
  CHECK(h.tokens_left(t0 + 10s) == std::nullopt);
  CHECK_FALSE(h.check(10, t0 + 10s).go); // requests still short
  CHECK(h.check(10, t0 + 60s).go);
  // A new answer's headers replace what was known.
  l.tokens = {30000, 30000, 1s};
  l.requests = {100, 99, 1s};
  h.answered(0, l, t0 + 61s);
  CHECK(h.check(20000, t0 + 61s).go);
}

TEST_CASE("provider headroom: a call larger than the whole limit goes, and a "
          "remaining without a reset holds nothing back") {
  provider_headroom h;
  provider_limits l;
  l.tokens = {1000, 0, 30s};
  h.answered(0, l, t0);
  CHECK_FALSE(h.check(10, t0).go);
  CHECK(h.check(5000, t0).go); // waiting would never make it fit
  // Sent, it is not counted: the upstream refuses it without counting it,
  // and it must not hold every other call back until the reset.
  auto big = h.take(5000, t0);
  CHECK(big.go);
  CHECK(big.counted == 0);
  CHECK(h.tokens_in_flight() == 0);
  CHECK(h.requests_in_flight() == 1);
  h.abandoned(big.counted);
  CHECK(h.requests_in_flight() == 0);
  provider_headroom no_reset;
  l.tokens = {1000, 0, std::nullopt};
  no_reset.answered(0, l, t0);
  CHECK(no_reset.check(10, t0).go);
  CHECK(no_reset.tokens_left(t0) == std::nullopt);
  // An answer with no rate-limit headers changes nothing.
  l.tokens = {1000, 0, 30s};
  h.answered(0, l, t0);
  h.answered(0, provider_limits{}, t0 + 1s);
  CHECK_FALSE(h.check(10, t0 + 1s).go);
}

TEST_CASE("provider headroom: calls in flight count against what an answer "
          "says, and an earlier request's late answer raises nothing") {
  provider_headroom h;
  REQUIRE(h.take(2000, t0).go); // a
  REQUIRE(h.take(2000, t0).go); // b
  REQUIRE(h.take(2000, t0).go); // c
  CHECK(h.tokens_in_flight() == 6000);
  CHECK(h.requests_in_flight() == 3);
  provider_limits l;
  // b's answer: the upstream had counted a and b; c may not be counted.
  l.tokens = {10000, 6000, 10s};
  h.answered(2000, l, t0 + 1s);
  CHECK(h.tokens_left(t0 + 1s) == 2000u); // 6000 less a and c in flight
  CHECK(h.tokens_in_flight() == 4000);
  // a's answer, arriving later, says what was left before b: ignored.
  l.tokens = {10000, 8000, 10s};
  h.answered(2000, l, t0 + 2s);
  CHECK(h.tokens_left(t0 + 2s) == 2000u);
  // c's answer says less: taken.
  l.tokens = {10000, 1000, 10s};
  h.answered(2000, l, t0 + 3s);
  CHECK(h.tokens_left(t0 + 3s) == 1000u);
  CHECK(h.tokens_in_flight() == 0);
  CHECK(h.requests_in_flight() == 0);
  CHECK_FALSE(h.take(1500, t0 + 3s).go);
  // A call that ended with no answer gives back only what it had in flight.
  REQUIRE(h.take(500, t0 + 4s).go);
  h.abandoned(500);
  CHECK(h.tokens_in_flight() == 0);
  CHECK(h.tokens_left(t0 + 4s) == 500u);
  // Past the reset (c's answer's: 13 s) the next answer says anything.
  l.tokens = {10000, 9000, 10s};
  h.answered(0, l, t0 + 12s);
  CHECK(h.tokens_left(t0 + 12s) == 500u);
  h.answered(0, l, t0 + 14s);
  CHECK(h.tokens_left(t0 + 14s) == 9000u);
}
