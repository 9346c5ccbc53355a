// The route's retry budget in the governor, in virtual time: under a
// failing upstream the retries in flight (counted at the source) stay
// within the share, waiting calls spend stall time, a "fail" budget ends
// calls at once, and every count comes back -- calls killed included.

#include <algorithm>
#include <chrono>
#include <vector>

#include <caf/exit_reason.hpp>
#include <catch2/catch.hpp>

#include "governor_fixture.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using policy::outcome_kind;

namespace {

policy::call_policy failing_policy() {
  policy::call_policy p;
  p.max_attempts = 3;
  p.stall_window = 60s;
  p.attempt_timeout = 30s;
  p.backoff = {1s, 1s, 0.0};
  p.poll_interval = 500ms;
  return p;
}

// One source that fails every attempt after 1 s, with room for all calls
// at once (its AIMD limit does not cap them).
test_source always_failing() {
  test_source s;
  s.name = "a";
  sim_phase p;
  p.latency_min = p.latency_max = 1s;
  p.transient_rate = 1.0;
  s.sim.phases = {p};
  s.breaker = lenient_breaker();
  s.aimd.initial = 64;
  s.aimd.min = 64;
  s.aimd.max = 256;
  return s;
}

std::shared_ptr<policy::retry_budget>
budget(double percent, uint32_t floor,
       policy::when_budget_spent when = policy::when_budget_spent::wait) {
  policy::retry_budget_config cfg;
  cfg.percent = percent;
  cfg.min_concurrency = floor;
  cfg.when_spent = when;
  return std::make_shared<policy::retry_budget>(cfg);
}

// Runs `calls` until all are done (or `limit`), in steps of 100 ms; returns
// the most attempts in flight at the source seen after the first wave
// (past 1.5 s), when every attempt is a retry.
int64_t worst_retry_wave(governor_fixture& f,
                         const std::vector<governed_call>& calls,
                         duration limit) {
  auto t0 = f.now();
  int64_t worst = 0;
  auto all_done = [&] {
    return std::all_of(calls.begin(), calls.end(),
                       [](auto& c) { return c.done(); });
  };
  while (!all_done() && f.now() - t0 < limit) {
    f.advance(100ms);
    if (f.now() - t0 > 1500ms)
      worst = std::max<int64_t>(worst, f.stats(0).in_flight.load());
  }
  return worst;
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "retry budget: a failing upstream sees at most the share of "
                 "retries in flight, not every call retrying") {
  make_route({always_failing()}, failing_policy());
  bool with_budget = GENERATE(true, false);
  if (with_budget)
    route->retry_budget = budget(20, 3);
  std::vector<governed_call> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(call(i + 1));
  CHECK(stats(0).in_flight == 20); // the first wave: no retries yet
  auto worst = worst_retry_wave(*this, calls, 10min);
  for (auto& c : calls) {
    REQUIRE(c.done());
    CHECK(c.result().reason == "retry_exhausted");
    CHECK(c.result().attempts.size() == 3); // waiting spent no attempt
  }
  CHECK(stats(0).attempts == 60);
  if (with_budget) {
    // 20 % of 20 active calls: 4 (the floor, 3, is lower).
    CHECK(worst == 4);
    auto s = route->retry_budget->load();
    CHECK(s.active == 0);
    CHECK(s.retrying == 0);
    CHECK(s.refused > 0);
    // A call that waited for the budget spent stall time doing it.
    auto most_stalled =
        std::max_element(calls.begin(), calls.end(), [](auto& a, auto& b) {
          return a.result().stalled < b.result().stalled;
        });
    CHECK(most_stalled->result().stalled > 5s);
  } else {
    CHECK(worst == 20); // every call retries at once
  }
}

TEST_CASE_METHOD(governor_fixture,
                 "retry budget: with when_spent = fail a call that may not "
                 "retry ends at once") {
  make_route({always_failing()}, failing_policy());
  route->retry_budget = budget(20, 3, policy::when_budget_spent::fail);
  std::vector<governed_call> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(call(i + 1));
  auto t0 = now();
  // First wave fails at 1 s; retries are asked for after the 1 s backoff.
  advance(2s + 1ms);
  int refused = 0;
  for (auto& c : calls)
    if (c.done()) {
      CHECK(c.result().status == call_status::all_sources_exhausted);
      CHECK(c.result().reason == "retry_budget");
      CHECK(c.result().attempts.size() == 1);
      CHECK(c.report->done_at - t0 == 2s);
      ++refused;
    }
  CHECK(refused == 16);
  CHECK(stats(0).in_flight == 4);
  worst_retry_wave(*this, calls, 10min);
  auto s = route->retry_budget->load();
  CHECK(s.active == 0);
  CHECK(s.retrying == 0);
}

TEST_CASE_METHOD(governor_fixture,
                 "retry budget: a call killed while retrying or while waiting "
                 "for the budget gives its counts back") {
  make_route({always_failing()}, failing_policy());
  route->retry_budget = budget(0, 1); // one retry in flight at a time
  auto a = call(1);
  auto b = call(2);
  advance(2s + 1ms); // both failed once; one retries, one waits
  auto s = route->retry_budget->load();
  CHECK(s.active == 2);
  CHECK(s.retrying == 1);
  CHECK(stats(0).in_flight == 1);
  caf::anon_send_exit(a.governor, caf::exit_reason::kill);
  caf::anon_send_exit(b.governor, caf::exit_reason::kill);
  run();
  CHECK(a.report->cancelled);
  CHECK(b.report->cancelled);
  s = route->retry_budget->load();
  CHECK(s.active == 0);
  CHECK(s.retrying == 0);
  // The budget is whole again: a new call retries.
  auto c = call(3);
  advance(2s + 1ms);
  CHECK(route->retry_budget->load().retrying == 1);
  run_until_done(c, 1min);
  CHECK(c.result().attempts.size() == 3);
}

TEST_CASE_METHOD(governor_fixture,
                 "retry budget: a round that finds no source takes no slot - "
                 "a call waiting for a breaker is not refused") {
  auto s = always_failing();
  s.breaker.window_size = 2;
  s.breaker.min_samples = 2;
  s.breaker.failure_rate_threshold = 1.0;
  s.breaker.open_duration = 5s;
  make_route({s}, failing_policy());
  route->retry_budget = budget(0, 1, policy::when_budget_spent::fail);
  auto a = call(1);
  auto b = call(2);
  // Both fail at 1 s and open the breaker; their rounds at 2 s find no
  // source: they wait for it, and neither is refused by the budget.
  advance(2500ms);
  CHECK_FALSE(a.done());
  CHECK_FALSE(b.done());
  CHECK(route->retry_budget->load().refused == 0);
  CHECK(route->retry_budget->load().retrying == 0);
}

TEST_CASE_METHOD(governor_fixture,
                 "retry budget: a call kept waiting by the budget ends when "
                 "its own stall time passes the window") {
  test_source s = always_failing();
  s.sim.phases[0].length = 1500ms;
  s.sim.phases.push_back(s.sim.phases[0]);
  s.sim.phases[1].length = {};
  s.sim.phases[1].latency_min = s.sim.phases[1].latency_max = 100s;
  auto p = failing_policy();
  p.stall_window = 5s;
  make_route({s}, p);
  route->retry_budget = budget(0, 1); // one retry in flight: wait
  auto a = call(1);
  auto b = call(2);
  auto t0 = now();
  // At 2 s one retries (100 s at the source), the other waits for the slot.
  advance(10s);
  auto& waiting = a.done() ? a : b;
  auto& retrying = a.done() ? b : a;
  REQUIRE(waiting.done());
  CHECK_FALSE(retrying.done());
  CHECK(waiting.result().reason == "retry_budget");
  CHECK(waiting.result().attempts.size() == 1);
  // 1 s productive, then more than the 5 s window waiting.
  CHECK(waiting.report->done_at - t0 > 6s);
  CHECK(waiting.report->done_at - t0 < 8s);
  CHECK(route->retry_budget->load().active == 1);
}
