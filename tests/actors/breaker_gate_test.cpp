// The breaker actor with a cluster probe gate (SPEC §2, §7): the claim
// before half-opening, in virtual time.

#include "breaker_shared.hpp"

using namespace breaker_test_support;

namespace {

// A stand-in for the breaker relay: answers each claim of the cluster's
// probe lease with what the test set (nothing: never answers).
struct gate_script {
  std::vector<std::pair<std::string, duration>> claims;
  std::optional<duration> answer = duration::zero();
};

caf::behavior gate_actor(caf::event_based_actor* self,
                         std::shared_ptr<gate_script> script) {
  return {
      [self, script](probe_claim_atom, const std::string& source,
                     duration ttl) -> caf::result<duration> {
        script->claims.emplace_back(source, ttl);
        if (script->answer)
          return *script->answer;
        // Never answered: the breaker's own timeout decides.
        return self->make_response_promise<duration>();
      },
  };
}

struct gated : fixture {
  std::shared_ptr<gate_script> script = std::make_shared<gate_script>();
  caf::actor gate = sys.spawn(gate_actor, script);

  gated() {
    caf::anon_send(breaker.actor, probe_gate_atom_v, gate);
    run();
  }

  // Another breaker of the same settings but `open_duration`, gated too.
  breaker_handle another(const std::string& name, duration open_duration) {
    auto c = cfg;
    c.open_duration = open_duration;
    auto b = spawn_breaker(sys, name, c);
    caf::anon_send(b.actor, probe_gate_atom_v, gate);
    run();
    return b;
  }

  // `n` calls to `h` that fail.
  void fail_on(const breaker_handle& h, int n) {
    for (int i = 0; i < n; ++i) {
      auto c = std::make_shared<caller_report>();
      auto a = sys.spawn(caller_actor, h.actor, c);
      caf::anon_send(a, ask_atom::value);
      run();
      caf::anon_send(a, finish_atom::value, outcome_kind::transient,
                     time_point{});
      run();
    }
  }
};

} // namespace

TEST_CASE_METHOD(gated,
                 "a shared breaker half-opens only once this node holds the "
                 "cluster's probe lease, claimed for one open period") {
  open_it();
  advance(30s);
  REQUIRE(script->claims.size() == 1);
  CHECK(script->claims[0].first == "upstream-a");
  CHECK(script->claims[0].second == 30s);
  CHECK(state() == S::half_open);
  CHECK(ask().verdict().what == decision::probe);
}

TEST_CASE_METHOD(gated,
                 "another node holds the probe lease: the breaker stays open "
                 "for the lease's time left, then claims again") {
  open_it();
  script->answer = duration{12s};
  advance(30s);
  REQUIRE(script->claims.size() == 1);
  CHECK(state() == S::open);
  auto c = ask();
  CHECK(c.verdict().what == decision::rejected);
  CHECK(c.verdict().retry_at == now() + 12s);
  CHECK(transitions().back() == std::make_pair(S::closed, S::open));
  script->answer = duration::zero();
  advance(12s - 1ns);
  CHECK(state() == S::open);
  advance(1ns);
  CHECK(script->claims.size() == 2);
  CHECK(state() == S::half_open);
}

TEST_CASE_METHOD(gated,
                 "the prober's verdict reaches this node while it waits: "
                 "closed, and the late end of the lease changes nothing") {
  open_it();
  script->answer = duration{12s};
  advance(30s);
  REQUIRE(state() == S::open);
  caf::anon_send(breaker.actor, peer_state_atom_v, S::closed, duration{});
  run();
  CHECK(state() == S::closed);
  advance(12s);
  CHECK(state() == S::closed);
  CHECK(script->claims.size() == 1);
}

TEST_CASE_METHOD(gated,
                 "Redis does not answer the claim: the breaker decides alone "
                 "(half-opens), after the claim's timeout at the latest") {
  open_it();
  script->answer = probe_claim_unanswered;
  advance(30s);
  CHECK(state() == S::half_open);
  // A relay that never answers: the request times out.
  auto b = another("upstream-b", cfg.open_duration);
  script->answer.reset();
  fail_on(b, 5);
  REQUIRE(b.mirror->load().state == S::open);
  advance(30s);
  CHECK(b.mirror->load().state == S::open); // the claim is out
  // Requests meanwhile start no second claim.
  auto claims = script->claims.size();
  auto c = std::make_shared<caller_report>();
  caf::anon_send(sys.spawn(caller_actor, b.actor, c), ask_atom::value);
  run();
  CHECK(c->verdict->what == decision::rejected);
  CHECK(script->claims.size() == claims);
  advance(probe_claim_timeout);
  CHECK(b.mirror->load().state == S::half_open);
  caf::anon_send_exit(b.actor, caf::exit_reason::user_shutdown);
  run();
}

TEST_CASE_METHOD(gated,
                 "a half-open breaker whose probe lease lapsed unused claims "
                 "it again before probing, and refused, it opens unpublished") {
  open_it();
  advance(30s);
  REQUIRE(state() == S::half_open);
  advance(30s); // no call came: this node's claim lapsed
  script->answer = duration{5s};
  auto c = ask();
  CHECK(c.verdict().what == decision::rejected);
  CHECK(script->claims.size() == 2);
  CHECK(state() == S::open);
  CHECK(events->back().from == S::half_open);
  CHECK(events->back().from_peer); // decided elsewhere: not published
  script->answer = duration::zero();
  advance(5s);
  CHECK(script->claims.size() == 3);
  CHECK(state() == S::half_open);
  CHECK(ask().verdict().what == decision::probe);
}

TEST_CASE_METHOD(gated,
                 "an open period extended while a claim is out still ends: "
                 "the breaker half-opens at its new end") {
  open_it();
  script->answer.reset(); // a slow relay: no answer
  advance(30s);
  REQUIRE(script->claims.size() == 1);
  // A peer's opening extends the period past the timer that fired.
  caf::anon_send(breaker.actor, peer_state_atom_v, S::open, duration{60s});
  run();
  script->answer = duration::zero();
  advance(probe_claim_timeout); // unanswered: decide alone -- but later
  CHECK(state() == S::open);
  advance(60s);
  CHECK(script->claims.size() == 2);
  CHECK(state() == S::half_open);
}

TEST_CASE_METHOD(gated,
                 "a claim still out from an older generation does not keep a "
                 "reopened breaker from claiming") {
  auto b = another("upstream-q", 1s);
  fail_on(b, 5);
  REQUIRE(b.mirror->load().state == S::open);
  script->answer.reset(); // a claim that hangs
  advance(1s);
  REQUIRE(script->claims.size() == 1);
  // A peer closes it, and its own failures open it again.
  caf::anon_send(b.actor, peer_state_atom_v, S::closed, duration{});
  run();
  fail_on(b, 5);
  REQUIRE(b.mirror->load().state == S::open);
  script->answer = duration::zero();
  advance(1s); // the new period ends while the old claim is still out
  CHECK(script->claims.size() == 2);
  CHECK(b.mirror->load().state == S::half_open);
  caf::anon_send_exit(b.actor, caf::exit_reason::user_shutdown);
  run();
}
