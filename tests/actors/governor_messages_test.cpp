// What one governed call costs in messages on the happy path (a built-in
// source, a closed breaker): the figure ARCHITECTURE.md and bench/RESULTS.md
// give, counted here in virtual time so a change that adds a message to
// every call fails a test instead of only slowing a benchmark.

#include <catch2/catch.hpp>

#include "governor_fixture.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

test_source quick_source() {
  sim_phase p;
  p.latency_min = p.latency_max = 5ms;
  test_source s;
  s.name = "a";
  s.sim.phases = {p};
  s.breaker = lenient_breaker();
  return s;
}

// Jobs the scheduler ran from the call's start to its client's end: the
// messages, and the first run of each actor spawned (the governor and the
// test's client; the admission tiers are made before counting).
size_t messages_of_one_call(governor_fixture& f) {
  auto path = f.fresh_path();
  f.run();
  auto before = f.processed;
  auto c = f.call(path);
  f.run_until_done(c, 1min);
  REQUIRE(c.done());
  REQUIRE(c.result().status == call_status::ok);
  f.run(); // the client's end (its governor's down message)
  return f.processed - before;
}

} // namespace

TEST_CASE_METHOD(governor_fixture,
                 "a happy call costs the governed five messages plus its "
                 "caller's and the source's own") {
  make_route({quick_source()}, policy::call_policy{});
  // The first call also writes its scope's progress (once per
  // progress_interval): one message more.
  auto first = messages_of_one_call(*this);
  auto second = messages_of_one_call(*this);
  // The governed five: `call`, `attempt`, its reply, `aimd` to the gate,
  // `record` to the breaker. Around them, not the governor's doing: the
  // simulated source's latency timer, the reply to the test's client, and
  // the client's down message when its governor ends; and the first run of
  // the two actors spawned (the governor, the client).
  CHECK(second == 5 + 3 + 2);
  CHECK(first == second + 1);
}
