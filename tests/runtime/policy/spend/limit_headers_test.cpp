// The rate-limit headers the gateway gives its clients (SPEC §12), in
// OpenAI's names and formats.

#include "sluice/runtime/policy/spend/limit_headers.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/spend/provider_limits.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;

TEST_CASE("limit headers: durations in OpenAI's format, read back as "
          "written") {
  CHECK(reset_duration_text(duration::zero()) == "0s");
  CHECK(reset_duration_text(-5s) == "0s");
  CHECK(reset_duration_text(20ms) == "20ms");
  CHECK(reset_duration_text(1ns) == "1ms"); // rounded up
  CHECK(reset_duration_text(1s) == "1s");
  CHECK(reset_duration_text(1500ms) == "1.5s");
  CHECK(reset_duration_text(6min) == "6m0s");
  CHECK(reset_duration_text(1h + 2min + 3s) == "1h2m3s");
  CHECK(reset_duration_text(2h) == "2h0m0s");
  CHECK(reset_duration_text(61s + 250ms) == "1m1.25s");
  for (duration d : {duration{20ms}, duration{1500ms}, duration{6min},
                     duration{1h + 2min + 3s}, duration{61s + 250ms}})
    CHECK(parse_reset_duration(reset_duration_text(d)) == d);
}

TEST_CASE("limit headers: the lanes a call is under, in order") {
  limit_state st;
  CHECK(limit_headers(st).empty());
  st.tokens = limit_state::lane{30000, 29000, 1500ms};
  auto h = limit_headers(st);
  REQUIRE(h.size() == 3);
  CHECK(h[0] == std::pair<std::string, std::string>{"x-ratelimit-limit-tokens",
                                                    "30000"});
  CHECK(h[1].second == "29000");
  CHECK(h[2] == std::pair<std::string, std::string>{"x-ratelimit-reset-tokens",
                                                    "1.5s"});
  st.requests = limit_state::lane{60, 0, 20s};
  h = limit_headers(st);
  REQUIRE(h.size() == 6);
  CHECK(h[0].first == "x-ratelimit-limit-requests");
  CHECK(h[2].second == "20s");
  CHECK(h[3].first == "x-ratelimit-limit-tokens");
}
