// The governor beyond the seed cases: retry exhaustion and its backoffs,
// failover and breakers, early wake, AIMD, fail fast, cancellation at every
// stage, the backend failing closed.

#include "governor_shared.hpp"

using namespace governor_test_support;

TEST_CASE_METHOD(governor_fixture,
                 "retries stop after max_attempts transient failures, with "
                 "exponential backoffs") {
  make_route({src("a", answering(500ms, 1.0))}, quick_policy());
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::all_sources_exhausted);
  CHECK(c.result().reason == "retry_exhausted");
  REQUIRE(c.result().attempts.size() == 4);
  for (auto& a : c.result().attempts)
    CHECK(a.kind == outcome_kind::transient);
  // Four 0.5 s attempts and backoffs of 1 s, 2 s and 4 s between them.
  CHECK(c.report->done_at - t0 == 4 * 500ms + 1s + 2s + 4s);
  // The next try is worth making after the next backoff (8 s).
  CHECK(c.result().retry_after_s == Approx(8.0));
}

TEST_CASE_METHOD(governor_fixture,
                 "seeded jitter keeps each backoff within its bounds and is "
                 "reproducible") {
  auto p = quick_policy();
  p.backoff.jitter = 0.5;
  make_route({src("a", answering(500ms, 1.0))}, p);
  auto t0 = now();
  auto c1 = call(7);
  run_until_done(c1, 1h);
  auto took = c1.report->done_at - t0;
  CHECK(took >= 2s + (7s / 2));
  CHECK(took <= 2s + 7s);
  t0 = now();
  auto c2 = call(7);
  run_until_done(c2, 1h);
  CHECK(c2.report->done_at - t0 == took); // same seed, same waits
}

TEST_CASE_METHOD(governor_fixture,
                 "a permanent upstream error fails fast with the upstream's "
                 "answer") {
  sim_phase bad = answering(200ms);
  bad.permanent_rate = 1.0;
  make_route({src("a", bad), src("b", answering(200ms))}, quick_policy());
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::upstream_error);
  CHECK(c.result().upstream_status == 400);
  CHECK(c.result().source == "a");
  CHECK(c.result().attempts.size() == 1);
  CHECK(stats(1).attempts == 0); // no failover for a bad request
}

TEST_CASE_METHOD(governor_fixture,
                 "failover: a failed attempt is retried on another source") {
  make_route({src("a", answering(100ms, 1.0)), src("b", answering(100ms))},
             quick_policy());
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK(c.result().source == "b");
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].source == "a");
  CHECK(c.result().attempts[0].kind == outcome_kind::transient);
  CHECK(c.result().attempts[1].source == "b");
}

TEST_CASE_METHOD(governor_fixture,
                 "failover: once a's breaker opens calls stop going to a, and "
                 "one probe goes there when it half-opens") {
  make_route({src("a", answering(100ms, 1.0), trips_after(3, 60s)),
              src("b", answering(100ms))},
             quick_policy());
  for (int i = 0; i < 3; ++i)
    run_until_done(call(i + 1), 1h);
  REQUIRE(source(0).breaker.is_open());
  auto a_attempts = stats(0).attempts.load();
  CHECK(a_attempts == 3);
  for (int i = 0; i < 5; ++i) {
    auto c = call(10 + i);
    run_until_done(c, 1h);
    CHECK(c.result().source == "b");
  }
  CHECK(stats(0).attempts == a_attempts); // a was skipped
  advance(60s);                           // a half-opens
  auto probe = call(99);
  run_until_done(probe, 1h);
  CHECK(stats(0).attempts == a_attempts + 1); // exactly one probe
  CHECK(probe.result().source == "b");        // the probe failed; b answered
  CHECK(source(0).breaker.is_open());
}

TEST_CASE_METHOD(governor_fixture,
                 "a governor waiting for a source wakes on a half-open "
                 "broadcast, long before its poll interval") {
  auto p = quick_policy();
  p.poll_interval = 120s;
  p.stall_window = 600s;
  make_route({src("a", answering(100ms), trips_after(1, 5s))}, p);
  // Open a's breaker with one failed call.
  record_failure(0);
  REQUIRE(source(0).breaker.is_open());
  auto opened = now();
  auto c = call();
  advance(4s);
  CHECK_FALSE(c.done()); // waiting for a runnable source
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  // Half-open at 5 s, probe answered 100 ms later; the poll was 60-120 s.
  CHECK(c.report->done_at - opened == 5s + 100ms);
}

TEST_CASE_METHOD(governor_fixture,
                 "a governor waiting for a source wakes when a source permit "
                 "frees") {
  auto p = quick_policy();
  p.poll_interval = 120s;
  p.stall_window = 600s;
  test_source s = src("a", answering(10s));
  s.aimd.initial = 1;
  s.aimd.min = 1;
  s.aimd.max = 1;
  make_route({s}, p);
  auto first = call(1);
  advance(1s);
  auto second = call(2); // the only permit is taken: waits
  run_until_done(second, 1h);
  REQUIRE(second.done());
  CHECK(second.result().ok());
  // The first call's permit frees at 10 s; the second answers 10 s later.
  CHECK(second.report->done_at - first.report->done_at == 10s);
}

TEST_CASE_METHOD(governor_fixture,
                 "AIMD: the source limit shrinks under 429s and recovers "
                 "under successes") {
  sim_phase limited = answering(100ms, 0, 1.0);
  limited.length = 10s;
  test_source s = src("a", limited);
  s.sim.phases.push_back(answering(100ms));
  s.aimd.initial = 16;
  s.aimd.min = 2;
  s.aimd.max = 32;
  auto p = quick_policy();
  p.backoff = {200ms, 1s, 0.0};
  make_route({s}, p);
  auto c = call();
  advance(9s);                       // 429s for nine seconds
  CHECK(source(0).tier->cap() == 2); // shrunk to its floor
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  // Successes with the source well used grow it back, one at a time.
  std::vector<governed_call> calls;
  for (int round = 0; round < 40; ++round) {
    for (uint32_t i = 0; i < source(0).tier->cap(); ++i)
      calls.push_back(call(100 + round * 64 + i));
    advance(1s);
  }
  CHECK(source(0).tier->cap() == 32); // never above max
}

TEST_CASE_METHOD(governor_fixture,
                 "cancellation during backoff returns everything") {
  make_route({src("a", answering(100ms, 1.0))}, quick_policy());
  auto path = fresh_path();
  auto c = call(path);
  advance(500ms); // the first attempt failed; backing off 1 s
  REQUIRE(stats(0).attempts == 1);
  REQUIRE(stats(0).in_flight == 0);
  caf::anon_send_exit(c.governor, caf::exit_reason::kill);
  run();
  CHECK(c.report->cancelled);
  CHECK(path.session.status().in_use == 0);
  CHECK(path.global.status().in_use == 0);
  CHECK(source(0).tier->load().in_use == 0);
  advance(10s);
  CHECK(stats(0).attempts == 1); // no attempt after the kill
}

TEST_CASE_METHOD(governor_fixture,
                 "cancellation while waiting for admission returns "
                 "everything") {
  make_route({src("a", answering(100ms))}, quick_policy());
  auto path = fresh_path();
  auto blocker_path = path;
  blocker_path.session = spawn_session_tier(sys, 16);
  path.connection = spawn_connection_tier(sys, 1);
  blocker_path.connection = path.connection;
  // The blocker holds the connection's only permit in a long attempt.
  make_route({src("slow", answering(100s))}, quick_policy());
  auto blocker = call(blocker_path);
  auto c = call(path);
  REQUIRE(path.connection.status().waiting == 1);
  CHECK(path.session.status().in_use == 1);
  caf::anon_send_exit(c.governor, caf::exit_reason::kill);
  run();
  CHECK(c.report->cancelled);
  CHECK(path.session.status().in_use == 0);
  CHECK(path.connection.status().waiting == 0);
  CHECK(path.connection.status().in_use == 1); // the blocker's
}

TEST_CASE_METHOD(governor_fixture,
                 "cancelling a probe frees the breaker's lease and the "
                 "source's attempt") {
  // The probe's answer (20 s) comes within its lease (one 30 s open period).
  make_route({src("a", answering(20s), trips_after(1, 30s))}, quick_policy());
  record_failure(0);
  advance(30s); // half-open
  auto probe = call(1);
  advance(1s);
  REQUIRE(stats(0).in_flight == 1);
  caf::anon_send_exit(probe.governor, caf::exit_reason::kill);
  run();
  CHECK(stats(0).in_flight == 0);
  CHECK(source(0).tier->load().in_use == 0);
  // The lease is free at once: the next call becomes the probe.
  auto next = call(2);
  run_until_done(next, 1h);
  CHECK(next.result().ok());
  CHECK(source(0).breaker.mirror->load().state == breaker_state::closed);
}

TEST_CASE_METHOD(governor_fixture,
                 "a failing scope backend fails the call closed") {
  // A backend that refuses every question.
  backend = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {
        [](progress_atom, const std::string&) {},
        [](progress_age_atom, const std::string&) -> caf::result<progress_age> {
          return caf::sec::runtime_error;
        },
    };
  });
  auto p = quick_policy();
  p.stall_window = 10s;
  p.poll_interval = 2s;
  make_route({src("a", answering(100ms))}, p);
  caf::anon_send(source(0).breaker.actor, isolate_atom_v);
  run();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::governance_backend_error);
  CHECK(global.status().in_use == 0);
}

TEST_CASE_METHOD(governor_fixture,
                 "a call that waits past the admission deadline gets "
                 "tool_busy naming the tier") {
  make_route({src("a", answering(100s))}, quick_policy());
  auto path = fresh_path();
  path.session = spawn_session_tier(sys, 1);
  auto first = call(path);
  auto second = call(path);
  advance(3s);
  REQUIRE(second.done());
  CHECK(second.result().status == call_status::tool_busy);
  CHECK(second.result().busy_tier == tier_kind::session);
  CHECK(second.result().attempts.empty());
}

TEST_CASE_METHOD(governor_fixture,
                 "a rate quota spaces calls out, and waiting for a token is "
                 "stall time") {
  test_source s = src("a", answering(10ms));
  s.quota = policy::quota_config{1.0, 1}; // one call per second
  make_route({s}, quick_policy());
  auto t0 = now();
  std::vector<governed_call> calls;
  for (int i = 0; i < 3; ++i)
    calls.push_back(call(i + 1));
  advance(5s);
  std::vector<duration> done;
  for (auto& c : calls) {
    REQUIRE(c.done());
    CHECK(c.result().ok());
    done.push_back(c.report->done_at - t0);
  }
  std::sort(done.begin(), done.end());
  // Tokens at 0 s, 1 s and 2 s (each answer takes 10 ms); the waiting calls
  // wake when the token is due, not at their 30 s poll.
  CHECK(done[0] == 10ms);
  CHECK(done[1] > 1s);
  CHECK(done[1] < 1s + 20ms);
  CHECK(done[2] > 2s);
  CHECK(done[2] < 2s + 20ms);
  CHECK(stats(0).attempts == 3);
}

TEST_CASE_METHOD(governor_fixture,
                 "an answer slower than ttft_timeout is a timeout") {
  auto p = quick_policy();
  p.attempt_timeout = 300s;
  p.ttft_timeout = 10s;
  p.max_attempts = 1;
  make_route({src("a", answering(20s))}, p);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  check_one_timeout(c, t0, 10s);
  // The source stopped working on it at the TTFT, not at its 20 s.
  CHECK(stats(0).timed_out == 1);
  CHECK(stats(0).in_flight == 0);
}

namespace {

// What a source of the service's own saw.
struct user_source_log {
  int attempts = 0;
  int requesters_gone = 0;
  duration timeout_field{};
  std::vector<caf::response_promise> unanswered;
};

// A source written the way users write them: it never answers, and it
// watches its requester as messages/source.hpp asks.
caf::behavior silent_user_source(caf::event_based_actor* self,
                                 std::shared_ptr<user_source_log> log) {
  self->set_down_handler([log](caf::down_msg&) { ++log->requesters_gone; });
  return {
      [self, log](attempt_atom, const call_request& req) {
        ++log->attempts;
        log->timeout_field = req.timeout;
        self->monitor(self->current_sender());
        log->unanswered.push_back(self->make_response_promise());
        return caf::delegated<source_reply>{};
      },
  };
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "a source of the service's own is timed from outside - its "
                 "requester terminates at the deadline") {
  auto p = quick_policy();
  p.max_attempts = 1;
  make_route({src("a", answering(1s))}, p);
  auto log = std::make_shared<user_source_log>();
  auto user = sys.spawn(silent_user_source, log);
  route->sources[0] =
      make_source(sys, "user", caf::actor_cast<source_actor>(user),
                  lenient_breaker(), policy::aimd_config{});
  REQUIRE_FALSE(route->sources[0].self_timed);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  check_one_timeout(c, t0, p.attempt_timeout);
  CHECK(log->attempts == 1);
  // It never had to time itself: the runtime did, and its requester (the
  // attempt's runner) terminated, so it knows to let the attempt go.
  CHECK(log->timeout_field == duration::zero());
  CHECK(log->requesters_gone == 1);
  CHECK(source(0).tier->load().in_use == 0);
  // The promises it kept point back at it: let go of them (no leak).
  log->unanswered.clear();
  caf::anon_send_exit(user, caf::exit_reason::kill);
  run();
}

// -- upstream hints are bounded (SPEC 7) --------------------------------------
