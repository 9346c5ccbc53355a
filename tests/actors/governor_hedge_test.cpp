// Hedging in the governor, in virtual time: a slow attempt gets a second
// one beside it on another source, the first complete answer wins and the
// other is cancelled at its source; overlapping attempts are productive
// time once; a hedged attempt that fails spends the retry budget; a stream
// hedges only before its first chunk; the seed's cases hold with hedging.

#include <chrono>
#include <string>

#include <catch2/catch.hpp>

#include "governor_fixture.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using policy::outcome_kind;

namespace {

policy::call_policy hedging(duration after, uint32_t max_hedged = 1) {
  policy::call_policy p;
  p.max_attempts = 3;
  p.stall_window = 60s;
  p.attempt_timeout = 100s;
  p.backoff = {1s, 10s, 0.0};
  p.poll_interval = 30s;
  p.hedge_after = after;
  p.max_hedged = max_hedged;
  return p;
}

test_source answering(std::string name, duration latency,
                      double transient = 0) {
  test_source s;
  s.name = std::move(name);
  sim_phase p;
  p.latency_min = p.latency_max = latency;
  p.transient_rate = transient;
  s.sim.phases = {p};
  s.sim.body = fallback_body; // three generic chunks when streamed
  s.breaker = lenient_breaker();
  return s;
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "hedging: a slow first source gets a hedge on the second, "
                 "which wins - the first is cancelled at its source") {
  make_route({answering("slow", 10s), answering("fast", 1s)}, hedging(2s));
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1min);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK(c.result().source == "fast");
  CHECK(c.report->done_at - t0 == 3s); // hedged at 2 s, answered 1 s later
  auto& at = c.result().attempts;
  REQUIRE(at.size() == 2);
  CHECK(at[0].source == "fast");
  CHECK(at[0].hedge);
  CHECK(at[0].won);
  CHECK_FALSE(at[0].cancelled);
  CHECK(at[1].source == "slow");
  CHECK_FALSE(at[1].hedge);
  CHECK(at[1].cancelled);
  CHECK_FALSE(at[1].won);
  run(); // the cancel reaches the slow source
  CHECK(stats(0).cancelled == 1);
  CHECK(stats(0).in_flight == 0);
  CHECK(source(0).tier->load().in_use == 0); // both permits came back
  CHECK(source(1).tier->load().in_use == 0);
  // Overlapping attempts are productive once: [0, 3 s], not 3 + 1 s.
  CHECK(c.result().productive == 3s);
  CHECK(c.result().stalled == 0s);
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: no hedge when the first attempt answers in time, "
                 "none without another source, none past max_hedged") {
  SECTION("in time") {
    make_route({answering("a", 1s), answering("b", 1s)}, hedging(2s));
    auto c = call();
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(c.result().attempts.size() == 1);
    CHECK(stats(1).attempts == 0);
  }
  SECTION("one source") {
    make_route({answering("a", 10s)}, hedging(2s));
    auto t0 = now();
    auto c = call();
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(c.report->done_at - t0 == 10s);
    CHECK(stats(0).attempts == 1); // never a second attempt at the same one
  }
  SECTION("max_hedged") {
    make_route({answering("a", 10s), answering("b", 10s), answering("c", 1s)},
               hedging(2s, 1));
    auto t0 = now();
    auto c = call();
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(stats(2).attempts == 0); // one hedge (at "b"), not two
    CHECK(c.report->done_at - t0 == 10s);
    CHECK(c.result().source == "a"); // it answered first (at 10 s)
  }
  SECTION("two hedges") {
    make_route({answering("a", 10s), answering("b", 10s), answering("c", 1s)},
               hedging(2s, 2));
    auto t0 = now();
    auto c = call();
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(c.result().source == "c"); // hedged at 2 s (b) and 4 s (c)
    CHECK(c.report->done_at - t0 == 5s);
    run();
    CHECK(stats(0).cancelled == 1);
    CHECK(stats(1).cancelled == 1);
  }
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: overlapping failed attempts are productive time "
                 "once, and each failure spends the retry budget") {
  auto p = hedging(2s);
  p.max_attempts = 2;
  make_route({answering("a", 5s, 1.0), answering("b", 4s, 1.0)}, p);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1min);
  REQUIRE(c.done());
  // a: [0, 5 s] fails; b (the hedge): [2 s, 6 s] fails. Two failures spend
  // both attempts: retry_exhausted when the second ends.
  CHECK(c.result().status == call_status::all_sources_exhausted);
  CHECK(c.result().reason == "retry_exhausted");
  CHECK(c.report->done_at - t0 == 6s);
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].kind == outcome_kind::transient);
  CHECK(c.result().attempts[1].kind == outcome_kind::transient);
  CHECK(c.result().attempts[1].hedge);
  // The union [0, 6 s] -- the sum, 9 s, would be more than the call lasted.
  CHECK(c.result().productive == 6s);
  CHECK(c.result().stalled == 0s);
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: a first failure waits for the hedge still out, "
                 "whose success wins") {
  make_route({answering("a", 3s, 1.0), answering("b", 2s)}, hedging(2s));
  auto t0 = now();
  auto c = call();
  run_until_done(c, 1min);
  REQUIRE(c.done());
  // a fails at 3 s while b (started at 2 s) is out: no backoff, no retry
  // round; b answers at 4 s.
  CHECK(c.result().ok());
  CHECK(c.result().source == "b");
  CHECK(c.report->done_at - t0 == 4s);
  CHECK(stats(0).attempts == 1);
  CHECK(c.result().attempts.size() == 2);
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: a stream hedges only before its first chunk") {
  stream_calls = true;
  SECTION("first chunk before hedge_after: no hedge") {
    // 4 s latency: chunks at 1, 2 and 3 s.
    make_route({answering("a", 4s), answering("b", 1s)}, hedging(2s));
    auto c = call();
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(c.result().source == "a");
    CHECK(stats(1).attempts == 0);
    CHECK(c.report->chunks.size() == 4);
  }
  SECTION("no chunk by hedge_after: the hedge's first chunk wins") {
    // a's first chunk would come at 10 s; b, hedged at 2 s, sends its
    // first at 3 s and commits the call to it.
    make_route({answering("a", 40s), answering("b", 4s)}, hedging(2s));
    auto t0 = now();
    auto c = call();
    // While the call is alive (streaming b): a was cancelled at its source
    // and its permit is back -- not merely when the governor ends.
    advance(4s);
    REQUIRE_FALSE(c.done());
    CHECK(stats(0).cancelled == 1);
    CHECK(stats(0).in_flight == 0);
    CHECK(source(0).tier->load().in_use == 0);
    CHECK(source(1).tier->load().in_use == 1);
    run_until_done(c, 1min);
    CHECK(c.result().ok());
    CHECK(c.result().source == "b");
    REQUIRE(c.report->chunks.size() == 4);
    CHECK(c.report->chunks[0].first - t0 == 3s);
    CHECK(c.report->done_at - t0 == 6s);
    run();
    CHECK(stats(0).cancelled == 1);
    CHECK(stats(0).in_flight == 0);
  }
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: the seed's case 1 holds - a first attempt that "
                 "times out at the stall window, a second that succeeds") {
  // stall_window == timeout == 300 s. Source a hangs (times out at 300 s);
  // hedged at 60 s, b answers after 400 s... also past the timeout. The
  // retry round after both succeeds on a. With hedging, overlapping time
  // is productive once, so the call is not stalled.
  auto p = hedging(60s);
  p.stall_window = 300s;
  p.attempt_timeout = 300s;
  p.max_attempts = 3;
  p.backoff = {2s, 2s, 0.0};
  test_source a = answering("a", 1s);
  a.sim.phases[0].length = 300s;
  a.sim.phases[0].hang_rate = 1.0;
  a.sim.phases.push_back(a.sim.phases[0]);
  a.sim.phases[1].hang_rate = 0;
  a.sim.phases[1].length = {};
  test_source b = answering("b", 1s);
  b.sim.phases[0].hang_rate = 1.0;
  make_route({a, b}, p);
  auto t0 = now();
  auto c = call();
  run_until_done(c, 2h);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK(c.result().source == "a");
  // a: [0, 300 s] timeout; b: [60, 360 s] timeout; backoff 2 s; a again
  // (out of its hanging phase) answers in 1 s.
  CHECK(c.report->done_at - t0 == 363s);
  CHECK(c.result().stalled == 2s);
  CHECK(c.result().productive == 361s);
}

TEST_CASE_METHOD(governor_fixture,
                 "hedging: a 429's Retry-After from one attempt of a hedged "
                 "pair still paces the retry after both failed") {
  test_source a = answering("a", 3s);
  a.sim.phases[0].rate_limit_rate = 1.0;
  a.sim.phases[0].retry_after = 10s;
  make_route({a, answering("b", 2s, 1.0)}, hedging(2s));
  // a: 429 (Retry-After 10 s) at 3 s while b, hedged at 2 s, is out; b
  // fails at 4 s with no hint. The next round waits for a's hint: 4 + 10 s.
  auto c = call();
  advance(13900ms);
  CHECK(stats(0).attempts + stats(1).attempts == 2);
  advance(200ms);
  CHECK(stats(0).attempts + stats(1).attempts == 3);
  CHECK_FALSE(c.done());
}
