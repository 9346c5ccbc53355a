// Which access-log lines of refused requests are written (issue 30,
// finding 11): a flood of unauthenticated refusals is rate-limited and the
// lines left out are counted; other lines are always written.

#include "sluice/runtime/policy/log_sampler.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::testing::t0;

TEST_CASE("refusals of clients without a key are sampled, the rest is not") {
  CHECK(sampled_line(401, false));
  CHECK(sampled_line(403, false));
  CHECK(sampled_line(400, false));
  CHECK(sampled_line(404, false));
  CHECK(sampled_line(429, false));
  CHECK_FALSE(sampled_line(429, true)); // a key's own rate limit
  CHECK_FALSE(sampled_line(404, true));
  CHECK_FALSE(sampled_line(200, false));
  CHECK_FALSE(sampled_line(503, false));
}

TEST_CASE("a flood of refusals writes its burst, then its rate, and counts "
          "the lines left out") {
  log_sampler s{t0, {10.0, 5}};
  int written = 0;
  for (int i = 0; i < 1000; ++i)
    written += s.admit(401, false, t0) ? 1 : 0;
  CHECK(written == 5);
  CHECK(s.suppressed() == 995);
  // Other lines pass whatever the flood, and carry the count once.
  CHECK(s.admit(200, false, t0));
  CHECK(s.take_suppressed() == 995);
  CHECK(s.take_suppressed() == 0);
  // 0.35 s later: 3 more refusals written (10 per second).
  written = 0;
  for (int i = 0; i < 1000; ++i)
    written += s.admit(401, false, t0 + 350ms) ? 1 : 0;
  CHECK(written == 3);
  CHECK(s.suppressed() == 997);
}

TEST_CASE("the default rate bounds a 20 s flood") {
  log_sampler s{t0};
  int written = 0;
  // 169,089 refusals over 20 s, the red team's flood.
  for (int i = 0; i < 169089; ++i)
    written += s.admit(401, false, t0 + i * (20s / 169089)) ? 1 : 0;
  CHECK(written <= refusal_lines_burst + 20 * refusal_lines_per_s + 1);
  CHECK(s.suppressed() == 169089 - static_cast<uint64_t>(written));
}
