// The governor's tests' shared part: a quick call policy, timeouts, a
// breaker that trips, a governor's phase.

#pragma once

#include <algorithm>
#include <chrono>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/response_promise.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "governor_fixture.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/sources.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using policy::governor_phase;
using policy::outcome_kind;

namespace governor_test_support {

inline policy::call_policy quick_policy() {
  policy::call_policy p;
  p.max_attempts = 4;
  p.stall_window = 60s;
  p.attempt_timeout = 30s;
  p.backoff = {1s, 10s, 0.0};
  p.poll_interval = 30s;
  return p;
}

inline sim_phase answering(duration latency, double transient = 0,
                           double limited = 0) {
  sim_phase p;
  p.latency_min = p.latency_max = latency;
  p.transient_rate = transient;
  p.rate_limit_rate = limited;
  return p;
}

inline test_source src(std::string name, sim_phase phase,
                       policy::breaker_config b = lenient_breaker()) {
  test_source s;
  s.name = std::move(name);
  s.sim.phases = {phase};
  s.breaker = b;
  return s;
}

// The call made one attempt, which timed out `after` its start at `t0`.
inline void check_one_timeout(const governed_call& c, time_point t0,
                              duration after) {
  REQUIRE(c.done());
  REQUIRE(c.result().attempts.size() == 1);
  CHECK(c.result().attempts[0].kind == outcome_kind::timeout);
  CHECK(c.report->done_at - t0 == after);
}

inline policy::breaker_config trips_after(uint32_t failures,
                                          duration open_for) {
  policy::breaker_config b;
  b.window_size = failures;
  b.min_samples = failures;
  b.failure_rate_threshold = 1.0;
  b.open_duration = open_for;
  return b;
}

inline governor_phase phase_of(governor_fixture& f, const caf::actor& gov) {
  caf::scoped_actor self{f.sys};
  self->send(gov, status_atom_v);
  f.run();
  auto out = governor_phase::finished;
  self->receive([&](const governor_status& s) { out = s.phase; },
                caf::after(0s) >> [] { FAIL("no status"); });
  return out;
}

} // namespace governor_test_support
