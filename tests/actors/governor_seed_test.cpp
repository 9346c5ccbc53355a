// The seed's acceptance cases for the two budgets (SPEC §3, seed 000 §7), in
// virtual time: each 300-second scenario runs in milliseconds.

#include <chrono>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "governor_fixture.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using policy::outcome_kind;

namespace {

// The seed's chat policy: 429 does not spend the retry budget.
policy::call_policy chat_policy() {
  policy::call_policy p;
  p.max_attempts = 3;
  p.stall_window = 300s;
  p.attempt_timeout = 300s;
  p.backoff = {2s, 60s, 0.0}; // jitter off
  p.poll_interval = 5s;
  p.rate_limit_spends_retry = false;
  return p;
}

// The seed's embedding and OCR policies: every failure spends the budget.
policy::call_policy embedding_policy() {
  auto p = chat_policy();
  p.rate_limit_spends_retry = true;
  return p;
}

policy::call_policy ocr_policy() {
  auto p = embedding_policy();
  p.poll_interval = 10s;
  p.max_attempts = 2;
  return p;
}

sim_phase healthy(duration latency = 1s) {
  sim_phase p;
  p.latency_min = p.latency_max = latency;
  return p;
}

sim_phase hanging(duration length) {
  sim_phase p;
  p.length = length;
  p.hang_rate = 1.0;
  return p;
}

test_source scripted(std::string name, std::vector<sim_phase> phases,
                     policy::breaker_config b = lenient_breaker()) {
  test_source s;
  s.name = std::move(name);
  s.sim.phases = std::move(phases);
  s.breaker = b;
  return s;
}

governor_status status_of(governor_fixture& f, const caf::actor& gov) {
  caf::scoped_actor self{f.sys};
  self->send(gov, status_atom_v);
  f.run();
  governor_status out{};
  self->receive([&](const governor_status& s) { out = s; },
                caf::after(0s) >> [] { FAIL("no status"); });
  return out;
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "seed case 1: one timeout equal to the stall window does not "
                 "kill the call") {
  // stall_window == timeout == 300 s; the first attempt hangs past 300 s and
  // times out, the second succeeds: the call succeeds.
  make_route({scripted("a", {hanging(1s), healthy()})}, chat_policy());
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].kind == outcome_kind::timeout);
  CHECK(c.result().attempts[0].elapsed == 300s);
  CHECK(c.result().attempts[1].kind == outcome_kind::ok);
  CHECK(c.report->done_at - t0 == 300s + 2s + 1s); // attempt, backoff, answer
  // The stall clock charged the backoff only: both attempts were work.
  CHECK(c.result().productive == 301s);
  CHECK(c.result().stalled == 2s);
  // The built-in source timed the attempt out itself and dropped it.
  CHECK(stats(0).timed_out == 1);
  CHECK(stats(0).in_flight == 0);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 2: embedding- and OCR-like kinds whose second pass "
                 "finds no runnable source still succeed") {
  auto policy = GENERATE(embedding_policy(), ocr_policy());
  // One timeout opens the breaker (60 s); the retry finds no runnable source,
  // waits, and gets the probe when the breaker half-opens.
  policy::breaker_config b;
  b.min_samples = 1;
  b.failure_rate_threshold = 1.0;
  b.open_duration = 60s;
  make_route({scripted("a", {hanging(1s), healthy()}, b)}, policy);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].kind == outcome_kind::timeout);
  // Woken by the half-open broadcast at 360 s, not by a later poll.
  CHECK(c.report->done_at - t0 == 360s + 1s);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 3: productive time alone never triggers the stall "
                 "verdict") {
  auto p = chat_policy();
  p.stall_window = 10s;
  p.max_attempts = 4;
  p.backoff = {1s, 60s, 0.0};
  make_route({scripted("a", {hanging(0s)})}, p);
  auto c = call();
  // After three timed-out attempts: 900 s productive, 3 s of backoff.
  advance(3 * 300s + 1s + 2s + 1s);
  auto s = status_of(*this, c.governor);
  CHECK(s.productive == 900s);
  CHECK(s.stalled < 10s);
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "retry_exhausted");
  CHECK(c.result().attempts.size() == 4);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 4: a pure polling wait that fills the window "
                 "stalls") {
  make_route({scripted("a", {healthy()})}, chat_policy());
  caf::anon_send(source(0).breaker.actor, isolate_atom_v);
  run();
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::all_sources_exhausted);
  CHECK(c.result().reason == "stalled");
  CHECK(c.result().attempts.empty());
  // Polls are 2.5-5 s apart: the verdict comes in the first poll past 300 s.
  CHECK(c.report->done_at - t0 > 300s);
  CHECK(c.report->done_at - t0 <= 305s);
  // The result carries the stall clock's accounts: all of it was charged.
  CHECK(c.result().stalled > 300s);
  CHECK(c.result().stalled <= c.report->done_at - t0);
  CHECK(c.result().productive == duration::zero());
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 5: 429 saturation with backoff ends in a stall "
                 "verdict, not an endless loop") {
  sim_phase limited = healthy(100ms);
  limited.rate_limit_rate = 1.0;
  make_route({scripted("a", {limited})}, chat_policy());
  auto t0 = now();
  auto c = call();
  run_until_done(c, 24h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "stalled");
  // Each round is a 100 ms 429 plus a 2 s backoff; 429s spend no retries.
  CHECK(c.result().attempts.size() == 143);
  CHECK(c.report->done_at - t0 > 300s);
  CHECK(c.report->done_at - t0 < 303s);
  // 429s are refunded: none of their time was productive.
  CHECK(c.result().productive == duration::zero());
  CHECK(c.result().stalled > 300s);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 6: a queueing gateway that answers 429 after the "
                 "full timeout gets one attempt and about 301 s") {
  // The broken draft made 301 attempts and took 25 hours here.
  sim_phase queueing;
  queueing.latency_min = queueing.latency_max = 299900ms;
  queueing.rate_limit_rate = 1.0;
  make_route({scripted("a", {queueing})}, chat_policy());
  auto t0 = now();
  auto c = call();
  run_until_done(c, 48h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "stalled");
  CHECK(c.result().attempts.size() == 1);
  auto took = c.report->done_at - t0;
  CHECK(took > 300s);
  CHECK(took < 303s);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 7: cancelling during an attempt releases "
                 "everything") {
  make_route({scripted("a", {healthy(100s)})}, chat_policy());
  auto path = fresh_path();
  auto c = call(path);
  advance(50s);
  REQUIRE(stats(0).in_flight == 1);
  CHECK(path.global.status().in_use == 1);
  CHECK(source(0).tier->load().in_use == 1);
  caf::anon_send_exit(c.governor, caf::exit_reason::kill);
  run();
  CHECK(c.report->cancelled);
  CHECK(path.session.status().in_use == 0);
  CHECK(path.connection.status().in_use == 0);
  CHECK(path.global.status().in_use == 0);
  CHECK(source(0).tier->load().in_use == 0);
  CHECK(stats(0).in_flight == 0);
  CHECK(stats(0).cancelled == 1);
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 8: a long attempt in one call does not move "
                 "another call's stall account") {
  // Call a spends 250 s in one attempt; call b, on a route whose only
  // source is isolated, polls for a runnable source the whole time.
  make_route({scripted("slow", {healthy(250s)})}, chat_policy());
  auto a = call(1);
  make_route({scripted("down", {healthy()})}, chat_policy());
  caf::anon_send(source(0).breaker.actor, isolate_atom_v);
  run();
  auto b = call(2);
  advance(100s);
  auto sa = status_of(*this, a.governor);
  auto sb = status_of(*this, b.governor);
  CHECK(sa.stalled < 1s);
  CHECK(sa.productive == 0s); // still inside its first attempt
  CHECK(sb.stalled >= 100s);
  CHECK(sb.stalled < 101s);
  advance(200s);
  REQUIRE(a.done());
  CHECK(a.result().ok());
  CHECK_FALSE(b.done()); // its own 300 s window is not over yet
}

TEST_CASE_METHOD(governor_fixture,
                 "seed case 9: only both windows exceeded stalls - scope "
                 "progress keeps a waiting call alive") {
  auto p = chat_policy();
  p.stall_window = 60s;
  make_route({scripted("a", {healthy()})}, p);
  caf::anon_send(source(0).breaker.actor, isolate_atom_v);
  run();
  auto t0 = now();
  auto c = call();
  // Other calls in the scope make progress every 30 s for 200 s: the local
  // window is exceeded, the scope's is not -- keep waiting.
  for (int i = 0; i < 7; ++i) {
    caf::anon_send(backend, progress_atom_v, std::string{"test"});
    advance(30s);
  }
  CHECK_FALSE(c.done());
  auto last_progress = t0 + 180s;
  // Progress stops: both exceeded once the scope is 60 s without progress.
  run_until_done(c, 1h);
  REQUIRE(c.done());
  CHECK(c.result().reason == "stalled");
  CHECK(c.report->done_at - last_progress > 60s);
  CHECK(c.report->done_at - last_progress <= 65s);
}
