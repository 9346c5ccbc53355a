#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

#include <chrono>
#include <functional>
#include <optional>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

// The breaker's steps: what each outcome, reset and reconfiguration tells
// the routes' ejection ledger (the breaker actor applies it in one place).

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

constexpr auto fail = outcome_class::failure;
constexpr auto succeed = outcome_class::success;

breaker_step outcome_n(breaker_policy& b, int n, outcome_class cls,
                       time_point at, const std::function<bool()>& may_eject,
                       std::optional<time_point> retry_after = std::nullopt) {
  breaker_step last;
  for (int i = 0; i < n; ++i)
    last = b.on_outcome(b.generation(), cls, 10ms, retry_after, at, may_eject);
  return last;
}

} // namespace

TEST_CASE("ejection_for: closed restores, open and half-open eject") {
  CHECK(ejection_for(std::nullopt) == ejection_action::none);
  breaker_transition t{breaker_state::closed, breaker_state::open, 2, t0};
  CHECK(ejection_for(t) == ejection_action::eject);
  t.to = breaker_state::half_open;
  CHECK(ejection_for(t) == ejection_action::eject);
  t.to = breaker_state::closed;
  CHECK(ejection_for(t) == ejection_action::restore);
}

TEST_CASE("on_outcome: an ignored outcome changes nothing and asks no one") {
  breaker_policy b{count_config()};
  int asked = 0;
  auto step = outcome_n(b, 20, outcome_class::ignored, t0,
                        [&] { return ++asked, true; }, t0 + 10s);
  CHECK_FALSE(step.transition);
  CHECK(step.ejection == ejection_action::none);
  CHECK(asked == 0);
  CHECK(b.window(t0).calls == 0);
}

TEST_CASE("on_outcome: the window opening asks the limit and ejects") {
  breaker_policy b{count_config()};
  int asked = 0;
  auto step = outcome_n(b, 5, fail, t0, [&] { return ++asked, true; });
  REQUIRE(step.transition);
  CHECK(step.transition->to == breaker_state::open);
  CHECK(step.ejection == ejection_action::eject);
  CHECK(asked == 1);
}

TEST_CASE("on_outcome: held past the limit, then restored once the failures stop") {
  breaker_policy b{count_config()};
  auto step = outcome_n(b, 5, fail, t0, [] { return false; });
  CHECK_FALSE(step.transition);
  CHECK(step.ejection == ejection_action::none);
  CHECK(b.held());
  // 5 failures of 10 still call for opening: held, nothing to tell.
  step = outcome_n(b, 5, succeed, t0, [] { return false; });
  CHECK(b.held());
  CHECK(step.ejection == ejection_action::none);
  // The sixth success brings the rate under the threshold: restored.
  step = outcome_n(b, 1, succeed, t0, [] { return false; });
  CHECK_FALSE(b.held());
  CHECK_FALSE(step.transition);
  CHECK(step.ejection == ejection_action::restore);
  // And only once.
  step = outcome_n(b, 1, succeed, t0, [] { return false; });
  CHECK(step.ejection == ejection_action::none);
}

TEST_CASE("on_outcome: a failure's Retry-After opens until then") {
  breaker_policy b{count_config()};
  auto step = outcome_n(b, 1, fail, t0, {}, t0 + 20s);
  REQUIRE(step.transition);
  CHECK(step.transition->to == breaker_state::open);
  CHECK(step.ejection == ejection_action::eject);
  CHECK(b.open_until() == t0 + 20s);
}

TEST_CASE("on_outcome: a Retry-After is capped at open_duration_max") {
  auto c = count_config();
  c.open_duration_max = 60s;
  breaker_policy b{c};
  outcome_n(b, 1, fail, t0, {}, t0 + 1000000000s);
  CHECK(b.open_until() == t0 + 60s);
}

TEST_CASE("on_outcome: a Retry-After refused by the limit leaves no mark") {
  breaker_policy b{count_config()};
  auto step = outcome_n(b, 1, fail, t0, [] { return false; }, t0 + 20s);
  CHECK_FALSE(step.transition);
  CHECK(b.state() == breaker_state::closed);
  // The ledger marked it held on refusal; one hinted failure must not keep
  // that mark, since nothing would ever clear it.
  CHECK(step.ejection == ejection_action::restore);
}

TEST_CASE("on_outcome: a Retry-After refused while the window holds keeps the mark") {
  breaker_policy b{count_config()};
  outcome_n(b, 4, fail, t0, [] { return false; });
  auto step = outcome_n(b, 1, fail, t0, [] { return false; }, t0 + 20s);
  CHECK(b.held());
  CHECK_FALSE(step.transition);
  CHECK(step.ejection == ejection_action::none);
}

TEST_CASE("on_outcome: an old generation's Retry-After only extends an open breaker") {
  breaker_policy b{count_config()};
  auto old = b.generation();
  outcome_n(b, 5, fail, t0, {});
  REQUIRE(b.state() == breaker_state::open);
  auto until = b.open_until();
  auto step = b.on_outcome(old, fail, 10ms, until + 40s, t0, {});
  CHECK_FALSE(step.transition);
  CHECK(b.open_until() == until + 40s);
  // Closed again, an old generation's hint opens nothing.
  b.reset(t0 + 1s);
  step = b.on_outcome(old, fail, 10ms, t0 + 100s, t0 + 1s, {});
  CHECK_FALSE(step.transition);
  CHECK(b.state() == breaker_state::closed);
}

TEST_CASE("on_outcome: open_on_retry_after off ignores the hint") {
  auto c = count_config();
  c.open_on_retry_after = false;
  breaker_policy b{c};
  auto step = outcome_n(b, 1, fail, t0, {}, t0 + 20s);
  CHECK_FALSE(step.transition);
  CHECK(b.state() == breaker_state::closed);
}

TEST_CASE("reset_step: always restores, with or without a transition") {
  breaker_policy b{count_config()};
  auto step = b.reset_step(t0);
  CHECK_FALSE(step.transition);
  CHECK(step.ejection == ejection_action::restore);
  outcome_n(b, 5, fail, t0, {});
  step = b.reset_step(t0 + 1s);
  REQUIRE(step.transition);
  CHECK(step.transition->to == breaker_state::closed);
  CHECK(step.ejection == ejection_action::restore);
}

TEST_CASE("reconfigure: a held breaker is restored, another is not") {
  breaker_policy b{count_config()};
  CHECK(b.reconfigure(count_config()) == ejection_action::none);
  outcome_n(b, 5, fail, t0, [] { return false; });
  REQUIRE(b.held());
  CHECK(b.reconfigure(count_config()) == ejection_action::restore);
  CHECK_FALSE(b.held());
}
