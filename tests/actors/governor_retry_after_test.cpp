// The governor (continued): Retry-After against the stall budget and
// max_retry_after, the phases it reports, start_at_once.

#include "governor_shared.hpp"

using namespace governor_test_support;

namespace {

sim_phase limited_with_hint(duration latency, duration hint) {
  auto p = answering(latency, 0, 1.0);
  p.retry_after = hint;
  return p;
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "a Retry-After longer than the stall budget ends the call at "
                 "once with the hint, permits returned") {
  auto p = quick_policy();
  p.stall_window = 5s;
  make_route({src("a", limited_with_hint(100ms, 86400s))}, p);
  auto path = fresh_path();
  auto t0 = now();
  auto c = call(path);
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::all_sources_exhausted);
  CHECK(c.result().reason == "retry_after_too_long");
  // The client is told no more than the node would wait itself.
  CHECK(c.result().retry_after_s ==
        Approx(std::chrono::duration<double>(p.max_retry_after).count()));
  // The verdict came with the 429, not after sleeping on the permits.
  CHECK(c.report->done_at - t0 == 100ms);
  CHECK(c.result().attempts.size() == 1);
  CHECK(path.session.status().in_use == 0);
  CHECK(path.connection.status().in_use == 0);
  CHECK(path.global.status().in_use == 0);
  CHECK(source(0).tier->load().in_use == 0);
  advance(1h);
  CHECK(stats(0).attempts == 1);
}

TEST_CASE_METHOD(governor_fixture,
                 "a Retry-After longer than the kind's max_retry_after ends "
                 "the call at once, even within the stall window") {
  auto p = quick_policy();
  p.stall_window = 600s;
  p.attempt_timeout = 30s;
  p.max_retry_after = 60s;
  make_route({src("a", limited_with_hint(100ms, 61s))}, p);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "retry_after_too_long");
  CHECK(c.result().retry_after_s == Approx(60.0)); // the hint was 61 s
  CHECK(c.report->done_at - t0 == 100ms);
}

TEST_CASE_METHOD(governor_fixture,
                 "a Retry-After within both bounds is honoured: never retried "
                 "before it") {
  auto p = quick_policy(); // 60 s window, 1 s backoff base
  sim_phase first = limited_with_hint(100ms, 7s);
  first.length = 1s;
  test_source s = src("a", first);
  s.sim.phases.push_back(answering(100ms));
  make_route({s}, p);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].kind == outcome_kind::rate_limited);
  // 429 after 100 ms, 7 s as the upstream asked (not the 1 s backoff), then
  // the 100 ms answer.
  CHECK(c.report->done_at - t0 == 100ms + 7s + 100ms);
}

TEST_CASE_METHOD(governor_fixture,
                 "a 503 with Retry-After: 999999999 opens the breaker for "
                 "exactly open_duration_max, and the call ends at once") {
  auto b = lenient_breaker();
  b.open_duration = 10s;
  b.open_duration_max = 5min;
  sim_phase down = answering(100ms, 1.0);
  down.retry_after = 999999999s;
  make_route({src("a", down, b)}, quick_policy());
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "retry_after_too_long");
  CHECK(c.result().retry_after_s ==
        Approx(std::chrono::duration<double>(quick_policy().max_retry_after)
                   .count())); // not 999999999
  CHECK(c.report->done_at - t0 == 100ms);
  run();
  auto opened = now();
  CHECK(source(0).breaker.mirror->load().state == breaker_state::open);
  advance_to(opened + 5min - 1ms);
  CHECK(source(0).breaker.mirror->load().state == breaker_state::open);
  advance_to(opened + 5min);
  CHECK(source(0).breaker.mirror->load().state == breaker_state::half_open);
}

TEST_CASE_METHOD(governor_fixture,
                 "a governor reports its phase: attempting then backing off "
                 "then attempting again") {
  make_route({src("a", answering(1s, 1.0))}, quick_policy());
  auto c = call();
  run();
  CHECK(phase_of(*this, c.governor) == governor_phase::attempting);
  advance(1s); // transient: a 1 s backoff (no jitter)
  CHECK(phase_of(*this, c.governor) == governor_phase::backing_off);
  advance(999ms);
  CHECK(phase_of(*this, c.governor) == governor_phase::backing_off);
  advance(1ms);
  CHECK(phase_of(*this, c.governor) == governor_phase::attempting);
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "retry_exhausted");
}

TEST_CASE_METHOD(governor_fixture,
                 "a governor with no runnable source reports waiting") {
  auto p = quick_policy();
  p.stall_window = 600s;
  make_route({src("a", answering(100ms), trips_after(1, 5s))}, p);
  record_failure(0);
  REQUIRE(source(0).breaker.is_open());
  auto c = call();
  run();
  CHECK(phase_of(*this, c.governor) == governor_phase::waiting);
  run_until_done(c, 1h); // the half-open broadcast wakes it
  REQUIRE(c.done());
  CHECK(c.result().ok());
}

TEST_CASE_METHOD(governor_fixture,
                 "start_at_once: a callback-form governor starts its call "
                 "without call_atom, and one sent anyway starts nothing") {
  make_route({src("a", answering(2s))}, quick_policy());
  auto result = std::make_shared<std::optional<call_result>>();
  governor_config cfg;
  cfg.request.route = "test";
  cfg.admission = fresh_path();
  cfg.route = route;
  cfg.on_done = [result](call_result r) { *result = std::move(r); };
  cfg.start_at_once = true;
  auto gov = spawn_governor(sys, std::move(cfg));
  run();
  CHECK(stats(0).attempts == 1); // under way, with no message sent to it
  // One call per governor: a call_atom now starts nothing.
  caf::anon_send(gov, call_atom_v);
  run();
  CHECK(stats(0).attempts == 1);
  advance(2s);
  REQUIRE(result->has_value());
  CHECK((*result)->ok());
  CHECK(stats(0).attempts == 1);
}

TEST_CASE_METHOD(governor_fixture,
                 "start_at_once: killed before its result, it reports "
                 "cancelled and gives back its permits") {
  make_route({src("a", answering(60s))}, quick_policy());
  auto result = std::make_shared<std::optional<call_result>>();
  auto path = fresh_path();
  governor_config cfg;
  cfg.request.route = "test";
  cfg.admission = path;
  cfg.route = route;
  cfg.on_done = [result](call_result r) { *result = std::move(r); };
  cfg.start_at_once = true;
  auto gov = spawn_governor(sys, std::move(cfg));
  run();
  CHECK(path.session.status().in_use == 1);
  caf::anon_send_exit(gov, caf::exit_reason::kill);
  gov = nullptr;
  run();
  REQUIRE(result->has_value());
  CHECK((*result)->status == call_status::cancelled);
  CHECK(path.session.status().in_use == 0);
  CHECK(path.global.status().in_use == 0);
}
