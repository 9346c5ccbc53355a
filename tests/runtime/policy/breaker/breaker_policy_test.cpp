#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

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

namespace {

breaker_config count_config() {
  breaker_config c;
  c.window_size = 10;
  c.min_samples = 5;
  c.failure_rate_threshold = 0.5;
  c.open_duration = 30s;
  return c;
}

// Records `n` outcomes at `at` under the current generation.
std::optional<breaker_transition> record_n(breaker_policy& b, int n,
                                           bool failed, time_point at,
                                           duration elapsed = 10ms) {
  std::optional<breaker_transition> last;
  for (int i = 0; i < n; ++i)
    if (auto t = b.record(b.generation(), failed, elapsed, at))
      last = t;
  return last;
}

std::string refusal(const breaker_config& c) {
  try {
    validate(c);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("min_samples - 1 failures never open the breaker") {
  breaker_policy b{count_config()};
  CHECK_FALSE(record_n(b, 4, true, t0));
  CHECK(b.state() == breaker_state::closed);
  // The fifth outcome reaches min_samples: 5 of 5 failed.
  auto t = record_n(b, 1, true, t0);
  REQUIRE(t);
  CHECK(t->from == breaker_state::closed);
  CHECK(t->to == breaker_state::open);
  CHECK(b.state() == breaker_state::open);
}

TEST_CASE("a failure rate exactly at the threshold opens, just below stays "
          "closed") {
  SECTION("below: 4 of 10 failed") {
    breaker_policy b{count_config()};
    record_n(b, 6, false, t0);
    CHECK_FALSE(record_n(b, 4, true, t0));
    CHECK(b.state() == breaker_state::closed);
  }
  SECTION("at: 5 of 10 failed") {
    breaker_policy b{count_config()};
    record_n(b, 5, false, t0);
    CHECK_FALSE(record_n(b, 4, true, t0));
    CHECK(record_n(b, 1, true, t0));
    CHECK(b.state() == breaker_state::open);
  }
}

TEST_CASE("time window: failures that aged out do not count") {
  auto c = count_config();
  c.window = breaker_config::window_kind::time;
  c.window_span = 10s;
  c.window_buckets = 10;
  breaker_policy b{c};
  record_n(b, 4, true, t0);
  // 10 s later those four have aged out; four more are not min_samples.
  CHECK_FALSE(record_n(b, 4, true, t0 + 10s));
  CHECK(b.window(t0 + 10s).calls == 4);
  // A fifth failure within the window opens it.
  CHECK(record_n(b, 1, true, t0 + 11s));
}

TEST_CASE("open turns half-open after exactly open_duration") {
  breaker_policy b{count_config()};
  record_n(b, 5, true, t0);
  REQUIRE(b.state() == breaker_state::open);
  CHECK(b.open_until() == t0 + 30s);
  CHECK_FALSE(b.on_open_elapsed(t0 + 30s - 1ns));
  auto t = b.on_open_elapsed(t0 + 30s);
  REQUIRE(t);
  CHECK(t->to == breaker_state::half_open);
  CHECK(b.state() == breaker_state::half_open);
}

TEST_CASE("open duration grows on consecutive re-openings, up to its cap") {
  auto c = count_config();
  c.open_duration_growth = 2.0;
  c.open_duration_max = 100s;
  breaker_policy b{c};
  record_n(b, 5, true, t0);
  auto now = t0;
  std::vector<duration> seen;
  for (int i = 0; i < 4; ++i) {
    seen.push_back(b.open_until() - now);
    now = b.open_until();
    REQUIRE(b.on_open_elapsed(now));
    REQUIRE(b.record(b.generation(), true, 1ms, now)); // the probe fails
  }
  CHECK(seen == std::vector<duration>{30s, 60s, 100s, 100s});
  // A successful probe resets the growth.
  now = b.open_until();
  b.on_open_elapsed(now);
  REQUIRE(b.record(b.generation(), false, 1ms, now));
  record_n(b, 5, true, now);
  CHECK(b.open_until() - now == 30s);
}

TEST_CASE("open until a server-given instant, where a later instant wins") {
  breaker_policy b{count_config()};
  auto t = b.hold_open_until(t0 + 120s, t0);
  REQUIRE(t);
  CHECK(t->to == breaker_state::open);
  CHECK(b.open_until() == t0 + 120s);
  CHECK_FALSE(b.hold_open_until(t0 + 60s, t0 + 1s)); // earlier: ignored
  CHECK(b.open_until() == t0 + 120s);
  b.hold_open_until(t0 + 200s, t0 + 2s); // later: extends
  CHECK(b.open_until() == t0 + 200s);
  CHECK_FALSE(b.on_open_elapsed(t0 + 199s));
  CHECK(b.on_open_elapsed(t0 + 200s));
}

TEST_CASE("probe success closes with a cleared window, failure re-opens with "
          "a new generation") {
  breaker_policy b{count_config()};
  record_n(b, 5, true, t0);
  b.on_open_elapsed(t0 + 30s);
  auto gen = b.generation();
  SECTION("success") {
    auto t = b.record(gen, false, 1ms, t0 + 31s);
    REQUIRE(t);
    CHECK(t->to == breaker_state::closed);
    CHECK(t->generation > gen);
    CHECK(b.window(t0 + 31s).calls == 0);
    CHECK_FALSE(record_n(b, 4, true, t0 + 31s)); // a fresh min_samples
  }
  SECTION("failure") {
    auto t = b.record(gen, true, 1ms, t0 + 31s);
    REQUIRE(t);
    CHECK(t->to == breaker_state::open);
    CHECK(t->generation > gen);
    CHECK(b.generation() == t->generation);
  }
}

TEST_CASE("an outcome from an earlier generation never moves the state") {
  breaker_policy b{count_config()};
  auto closed_gen = b.generation();
  record_n(b, 5, true, t0);
  b.on_open_elapsed(t0 + 30s);
  REQUIRE(b.state() == breaker_state::half_open);
  // A call admitted while closed fails now: it is not the probe.
  CHECK_FALSE(b.record(closed_gen, true, 1ms, t0 + 31s));
  CHECK(b.state() == breaker_state::half_open);
  // Nor does a late success close it.
  CHECK_FALSE(b.record(closed_gen, false, 1ms, t0 + 31s));
  CHECK(b.state() == breaker_state::half_open);
}

TEST_CASE("slow successes open the breaker by the slow-call rule") {
  auto c = count_config();
  c.slow_call = 2s;
  c.slow_call_rate_threshold = 0.8;
  breaker_policy b{c};
  record_n(b, 3, false, t0, 3s);
  CHECK(b.window(t0).slow == 3);
  CHECK_FALSE(record_n(b, 1, false, t0, 1s)); // 3 of 4 slow, below min
  CHECK(record_n(b, 1, false, t0, 5s));       // 4 of 5 slow = 0.8
  CHECK(b.state() == breaker_state::open);
}

TEST_CASE("nonsense breaker settings are refused, naming the field") {
  using edit = void (*)(breaker_config&);
  struct bad_setting {
    const char* field;
    edit apply;
  };
  const bad_setting cases[] = {
      {"failure_rate_threshold",
       [](auto& c) { c.failure_rate_threshold = 1.5; }},
      {"failure_rate_threshold", [](auto& c) { c.failure_rate_threshold = 0; }},
      {"slow_call_rate_threshold",
       [](auto& c) { c.slow_call_rate_threshold = -0.1; }},
      {"window_size", [](auto& c) { c.window_size = 0; }},
      {"open_duration", [](auto& c) { c.open_duration = -1s; }},
      {"open_duration_growth", [](auto& c) { c.open_duration_growth = 0.5; }},
      {"open_duration_max", [](auto& c) { c.open_duration_max = 1s; }},
      {"min_samples", [](auto& c) { c.min_samples = 0; }},
      {"window_span",
       [](auto& c) {
         c.window = breaker_config::window_kind::time;
         c.window_span = 0s;
       }},
      {"slow_call", [](auto& c) { c.slow_call = -2s; }},
      {"half_open_probes", [](auto& c) { c.half_open_probes = 0; }},
      // Upper bounds: 2e9 buckets died of bad_alloc inside the actor.
      {"window_size", [](auto& c) { c.window_size = window_limit + 1; }},
      {"window_buckets",
       [](auto& c) {
         c.window = breaker_config::window_kind::time;
         c.window_buckets = 2000000000;
       }},
      {"min_samples", [](auto& c) { c.min_samples = window_limit + 1; }},
      {"half_open_probes",
       [](auto& c) { c.half_open_probes = window_limit + 1; }},
      {"open_duration_max",
       [](auto& c) { c.open_duration_max = duration_limit + 1s; }},
      {"window_span",
       [](auto& c) {
         c.window = breaker_config::window_kind::time;
         c.window_span = duration_limit + 1s;
       }},
      {"open_duration_growth", [](auto& c) { c.open_duration_growth = 1e6; }},
  };
  for (const auto& bad : cases) {
    auto c = count_config();
    bad.apply(c);
    INFO("field " << bad.field);
    CHECK(refusal(c).rfind(std::string{bad.field} + ":", 0) == 0);
    CHECK_THROWS_AS(breaker_policy{c}, std::invalid_argument);
  }
  CHECK(refusal(count_config()).empty());
}

TEST_CASE("an isolated breaker stays open until reset") {
  breaker_policy b{count_config()};
  record_n(b, 3, true, t0);
  auto t = b.isolate(t0);
  REQUIRE(t);
  CHECK(t->to == breaker_state::open);
  CHECK(b.isolated());
  CHECK_FALSE(b.on_open_elapsed(t0 + 24h));
  CHECK(b.state() == breaker_state::open);
  auto r = b.reset(t0 + 24h);
  REQUIRE(r);
  CHECK(r->to == breaker_state::closed);
  CHECK_FALSE(b.isolated());
  CHECK(b.window(t0 + 24h).calls == 0);
}

TEST_CASE("reset clears the window of a closed breaker without a transition") {
  breaker_policy b{count_config()};
  record_n(b, 4, true, t0);
  CHECK_FALSE(b.reset(t0));
  CHECK(b.window(t0).calls == 0);
  CHECK_FALSE(record_n(b, 4, true, t0)); // four again: below min_samples
}

TEST_CASE("outcome classes are configurable per breaker") {
  breaker_config c = count_config();
  breaker_policy defaults{c};
  CHECK(defaults.classify(outcome_kind::ok) == outcome_class::success);
  CHECK(defaults.classify(outcome_kind::transient) == outcome_class::failure);
  CHECK(defaults.classify(outcome_kind::timeout) == outcome_class::failure);
  CHECK(defaults.classify(outcome_kind::rate_limited) ==
        outcome_class::ignored);
  CHECK(defaults.classify(outcome_kind::permanent) == outcome_class::success);
  c.classes.rate_limited = outcome_class::failure;
  c.classes.timeout = outcome_class::ignored;
  breaker_policy custom{c};
  CHECK(custom.classify(outcome_kind::rate_limited) == outcome_class::failure);
  CHECK(custom.classify(outcome_kind::timeout) == outcome_class::ignored);
}

TEST_CASE("a server-given instant shorter than open_duration is honoured "
          "exactly") {
  breaker_policy b{count_config()}; // open_duration 30 s
  REQUIRE(b.hold_open_until(t0 + 5s, t0));
  CHECK(b.open_until() == t0 + 5s);
  CHECK(b.on_open_elapsed(t0 + 5s));
  // A server-driven opening does not grow our own open duration.
  REQUIRE(b.record(b.generation(), true, 1ms, t0 + 5s)); // probe fails
  CHECK(b.open_until() == t0 + 5s + 30s);
}

TEST_CASE("a server-given instant never holds the breaker open past "
          "open_duration_max (SPEC 7)") {
  auto c = count_config();
  c.open_duration_max = 5min;
  breaker_policy b{c};
  // Retry-After: 999999999 on a 503 opened it until ~2057.
  auto t = b.hold_open_until(t0 + 999999999s, t0);
  REQUIRE(t);
  CHECK(t->to == breaker_state::open);
  CHECK(b.open_until() == t0 + 5min);
  CHECK_FALSE(b.on_open_elapsed(t0 + 5min - 1ms));
  auto h = b.on_open_elapsed(t0 + 5min);
  REQUIRE(h);
  CHECK(h->to == breaker_state::half_open);
  // Extending an open period is capped the same way, from the extension's now.
  breaker_policy e{c};
  e.hold_open_until(t0 + 10s, t0);
  CHECK_FALSE(e.hold_open_until(t0 + 24h, t0 + 1s));
  CHECK(e.open_until() == t0 + 1s + 5min);
  // A later, still bounded instant wins as before.
  breaker_policy f{c};
  f.hold_open_until(t0 + 10s, t0);
  f.hold_open_until(t0 + 100s, t0 + 1s);
  CHECK(f.open_until() == t0 + 100s);
}

TEST_CASE("enum names: each to_string has its parse, and they round-trip") {
  for (auto x :
       {breaker_state::closed, breaker_state::open, breaker_state::half_open})
    CHECK(parse_breaker_state(to_string(x)) == x);
  CHECK(to_string(breaker_state::half_open) == "half_open");
  CHECK_FALSE(parse_breaker_state("half-open"));
  CHECK_FALSE(parse_breaker_state(""));
  for (auto c :
       {outcome_class::success, outcome_class::failure, outcome_class::ignored})
    CHECK(parse_outcome_class(to_string(c)) == c);
  CHECK_FALSE(parse_outcome_class("fail"));
  // Compile-time: the outcome names live beside their enum, in the header.
  static_assert(to_string(outcome_kind::rate_limited) == "rate_limited");
}

TEST_CASE("reconfigure keeps an open breaker open, its generation and "
          "period, and starts a new window") {
  breaker_policy b{count_config()};
  REQUIRE(record_n(b, 5, true, t0));
  REQUIRE(b.state() == breaker_state::open);
  auto gen = b.generation();
  auto until = b.open_until();
  auto tuned = count_config();
  tuned.failure_rate_threshold = 0.9;
  tuned.min_samples = 3;
  tuned.window_size = 4;
  b.reconfigure(tuned);
  CHECK(b.state() == breaker_state::open);
  CHECK(b.generation() == gen);
  CHECK(b.open_until() == until);
  CHECK(b.config().failure_rate_threshold == 0.9);
  // Through half-open and a good probe, closed under the new thresholds:
  // two failures of three no longer open it, a window of four do.
  REQUIRE(b.on_open_elapsed(until));
  REQUIRE(b.record(b.generation(), false, 10ms, until));
  REQUIRE(b.state() == breaker_state::closed);
  CHECK_FALSE(record_n(b, 2, true, until));
  CHECK_FALSE(record_n(b, 1, false, until));
  CHECK(record_n(b, 4, true, until));
  CHECK(b.state() == breaker_state::open);
  auto bad = tuned;
  bad.min_samples = 0;
  CHECK_THROWS_AS(b.reconfigure(bad), std::invalid_argument);
  CHECK(b.config().min_samples == 3);
}
