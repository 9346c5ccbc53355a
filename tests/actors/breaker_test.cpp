// The breaker actor in virtual time (SPEC §2): transitions, probe leases,
// generations, broadcast and the mirror.

#include "breaker_shared.hpp"

using namespace breaker_test_support;

TEST_CASE_METHOD(fixture,
                 "min_samples failures open the breaker, which then rejects "
                 "with the instant it half-opens") {
  for (int i = 0; i < 4; ++i)
    finish(ask(), outcome_kind::transient);
  CHECK(state() == S::closed);
  CHECK_FALSE(breaker.is_open());
  auto opened_at = now();
  finish(ask(), outcome_kind::transient);
  CHECK(breaker.is_open());
  auto c = ask();
  CHECK(c.verdict().what == decision::rejected);
  CHECK(c.verdict().retry_at == opened_at + 30s);
  CHECK(transitions() == decltype(transitions()){{S::closed, S::open}});
}

TEST_CASE_METHOD(fixture, "a rate-limited outcome is not a failure") {
  for (int i = 0; i < 20; ++i)
    finish(ask(), outcome_kind::rate_limited);
  CHECK(state() == S::closed);
  CHECK(events->empty());
}

TEST_CASE_METHOD(fixture,
                 "open turns half-open after exactly open_duration, not "
                 "before") {
  open_it();
  auto opened_at = now();
  advance(30s - 1ns);
  CHECK(state() == S::open);
  CHECK(ask().verdict().what == decision::rejected);
  advance(1ns);
  CHECK(state() == S::half_open);
  REQUIRE(events->size() == 2);
  CHECK(events->back().to == S::half_open);
  CHECK(events->back().at == opened_at + 30s);
}

TEST_CASE_METHOD(fixture, "half-open grants exactly one probe at a time") {
  open_it();
  advance(30s);
  auto probe_at = now();
  auto a = ask();
  CHECK(a.verdict().what == decision::probe);
  CHECK(a.verdict().lease != 0);
  auto b = ask();
  CHECK(b.verdict().what == decision::rejected);
  CHECK(b.verdict().retry_at == probe_at + 30s); // when a's lease lapses
  CHECK(ask().verdict().what == decision::rejected);
}

TEST_CASE_METHOD(fixture,
                 "a probe holder that is killed frees its lease at once") {
  open_it();
  advance(30s);
  auto a = ask();
  REQUIRE(a.verdict().what == decision::probe);
  caf::anon_send_exit(a.actor, caf::exit_reason::kill);
  run();
  auto b = ask();
  CHECK(b.verdict().what == decision::probe);
  CHECK(b.verdict().lease != a.verdict().lease);
  finish(b, outcome_kind::ok);
  CHECK(state() == S::closed);
}

TEST_CASE_METHOD(fixture,
                 "a silent probe's lease lapses after one open_duration and "
                 "its late outcome is ignored") {
  open_it();
  advance(30s);
  auto a = ask();
  REQUIRE(a.verdict().what == decision::probe);
  advance(30s - 1ns);
  auto b = spawn_caller();
  ask(b);
  CHECK(b.verdict().what == decision::rejected);
  advance(1ns);
  ask(b);
  REQUIRE(b.verdict().what == decision::probe);
  // The first probe answers at last: it no longer speaks for the breaker.
  finish(a, outcome_kind::transient);
  CHECK(state() == S::half_open);
  finish(b, outcome_kind::ok);
  CHECK(state() == S::closed);
}

TEST_CASE_METHOD(fixture,
                 "a successful probe closes the breaker with a cleared "
                 "window") {
  open_it();
  advance(30s);
  auto gen = breaker.mirror->load().generation;
  auto p = ask();
  finish(p, outcome_kind::ok);
  CHECK(state() == S::closed);
  CHECK(breaker.mirror->load().generation > gen);
  // A fresh window: four failures are below min_samples again.
  for (int i = 0; i < 4; ++i)
    finish(ask(), outcome_kind::transient);
  CHECK(state() == S::closed);
}

TEST_CASE_METHOD(fixture,
                 "a failed probe re-opens the breaker with a new generation") {
  open_it();
  advance(30s);
  auto gen = breaker.mirror->load().generation;
  auto p = ask();
  auto reopened_at = now();
  finish(p, outcome_kind::timeout);
  CHECK(state() == S::open);
  CHECK(breaker.mirror->load().generation > gen);
  CHECK(ask().verdict().retry_at == reopened_at + 30s);
  // A new probe becomes possible after the next open period, not before.
  advance(30s);
  CHECK(ask().verdict().what == decision::probe);
}

TEST_CASE_METHOD(fixture,
                 "a call admitted while closed that fails during half-open is "
                 "not the probe") {
  auto slow_call = ask();
  REQUIRE(slow_call.verdict().what == decision::go);
  open_it();
  advance(30s);
  REQUIRE(state() == S::half_open);
  finish(slow_call, outcome_kind::transient);
  CHECK(state() == S::half_open);
  // The probe slot is still free, and the probe alone decides.
  auto p = ask();
  CHECK(p.verdict().what == decision::probe);
  finish(p, outcome_kind::ok);
  CHECK(state() == S::closed);
}

TEST_CASE_METHOD(fixture,
                 "Retry-After on a 503 opens the breaker until that instant") {
  auto c = ask();
  auto until = now() + 120s;
  finish(c, outcome_kind::transient, until);
  CHECK(state() == S::open);
  CHECK(ask().verdict().retry_at == until);
  advance(119s);
  CHECK(state() == S::open);
  advance(1s);
  CHECK(state() == S::half_open);
}

TEST_CASE_METHOD(fixture,
                 "every subscriber sees every transition in order - a dead "
                 "subscriber is dropped") {
  auto second = std::make_shared<std::vector<breaker_event>>();
  auto doomed = std::make_shared<std::vector<breaker_event>>();
  sys.spawn(listener_actor, breaker.actor, second);
  auto d = sys.spawn(listener_actor, breaker.actor, doomed);
  run();
  open_it(); // closed -> open
  caf::anon_send_exit(d, caf::exit_reason::kill);
  run();
  advance(30s);                           // open -> half_open
  finish(ask(), outcome_kind::transient); // half_open -> open
  advance(30s);                           // open -> half_open
  finish(ask(), outcome_kind::ok);        // half_open -> closed
  std::vector<std::pair<S, S>> expected{{S::closed, S::open},
                                        {S::open, S::half_open},
                                        {S::half_open, S::open},
                                        {S::open, S::half_open},
                                        {S::half_open, S::closed}};
  CHECK(transitions() == expected);
  REQUIRE(second->size() == events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    CHECK((*second)[i].generation == (*events)[i].generation);
    CHECK((*second)[i].source == "upstream-a");
    if (i > 0)
      CHECK((*events)[i].generation > (*events)[i - 1].generation);
  }
  CHECK(doomed->size() == 1); // it saw the first transition, then died
  caf::scoped_actor self{sys};
  self->send(breaker.actor, status_atom_v);
  run();
  self->receive([](const breaker_status& st) { CHECK(st.subscribers == 2); },
                caf::after(0s) >> [] { FAIL("no status"); });
}

TEST_CASE_METHOD(fixture, "the mirror follows the authoritative state") {
  caf::scoped_actor self{sys};
  auto check_mirror = [&] {
    self->send(breaker.actor, status_atom_v);
    run();
    self->receive(
        [&](const breaker_status& st) {
          CHECK(st.state == breaker.mirror->load().state);
          CHECK(st.generation == breaker.mirror->load().generation);
        },
        caf::after(0s) >> [] { FAIL("no status"); });
  };
  check_mirror();
  open_it();
  check_mirror();
  advance(30s);
  check_mirror();
  finish(ask(), outcome_kind::ok);
  check_mirror();
}

TEST_CASE_METHOD(virtual_time_fixture, "a breaker refuses nonsense settings") {
  policy::breaker_config cfg;
  cfg.failure_rate_threshold = 2.0;
  CHECK_THROWS_WITH(spawn_breaker(sys, "x", cfg),
                    Catch::Contains("failure_rate_threshold"));
  cfg = {};
  cfg.window_size = 0;
  CHECK_THROWS_WITH(spawn_breaker(sys, "x", cfg),
                    Catch::Contains("window_size"));
}

TEST_CASE_METHOD(fixture,
                 "an isolated breaker lets nothing through until reset") {
  caf::anon_send(breaker.actor, isolate_atom_v);
  run();
  CHECK(breaker.is_open());
  advance(24h);
  CHECK(breaker.is_open());
  CHECK(ask().verdict().what == decision::rejected);
  caf::anon_send(breaker.actor, reset_atom_v);
  run();
  CHECK(state() == S::closed);
  CHECK(ask().verdict().what == decision::go);
  CHECK(transitions() ==
        decltype(transitions()){{S::closed, S::open}, {S::open, S::closed}});
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "a source whose 429s count as failures opens on them") {
  policy::breaker_config cfg;
  cfg.min_samples = 3;
  cfg.classes.rate_limited = policy::outcome_class::failure;
  auto b = spawn_breaker(sys, "strict", cfg);
  caf::scoped_actor self{sys};
  for (int i = 0; i < 3; ++i) {
    call_outcome out;
    out.generation = b.mirror->load().generation;
    out.kind = outcome_kind::rate_limited;
    self->send(b.actor, record_atom_v, out);
  }
  run();
  CHECK(b.is_open());
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "a breaker told to ignore Retry-After stays closed on one "
                 "503") {
  policy::breaker_config cfg;
  cfg.open_on_retry_after = false;
  auto b = spawn_breaker(sys, "patient", cfg);
  caf::scoped_actor self{sys};
  call_outcome out;
  out.generation = b.mirror->load().generation;
  out.kind = outcome_kind::transient;
  out.retry_after = now() + 60s;
  self->send(b.actor, record_atom_v, out);
  run();
  CHECK_FALSE(b.is_open());
}

TEST_CASE_METHOD(fixture,
                 "a 503's Retry-After of 999999999 s opens the breaker for "
                 "exactly open_duration_max, not until 2057 (SPEC 7)") {
  // cfg.open_duration_max is the default 5 min.
  auto c = ask();
  auto t0 = now();
  finish(c, outcome_kind::transient, t0 + 999999999s);
  CHECK(state() == S::open);
  CHECK(ask().verdict().retry_at == t0 + 5min);
  REQUIRE(!events->empty());
  CHECK(events->back().open_for == 5min);
  advance(5min - 1ms);
  CHECK(state() == S::open);
  advance(1ms);
  CHECK(state() == S::half_open);
}

TEST_CASE_METHOD(fixture,
                 "a peer's open period is capped at open_duration_max and "
                 "cannot overflow the clock") {
  caf::anon_send(breaker.actor, peer_state_atom_v, S::open, duration::max());
  run();
  CHECK(state() == S::open);
  CHECK(ask().verdict().retry_at == now() + 5min);
  advance(5min);
  CHECK(state() == S::half_open);
}

TEST_CASE_METHOD(fixture,
                 "a subscriber whose probe lease lapsed is still dropped when "
                 "it terminates") {
  // CAF 0.17's demonitor removes every monitor of an actor: dropping the
  // lease must not stop the breaker from seeing its subscriber go.
  open_it();
  advance(30s);
  auto both = sys.spawn([b = breaker.actor](caf::event_based_actor* self) {
    self->request(b, caf::infinite, subscribe_atom_v)
        .then([self, b](const breaker_status&) {
          self->request(b, caf::infinite, allow_atom_v)
              .then([](const breaker_verdict&) {});
        });
    return caf::behavior{[](const breaker_event&) {}};
  });
  run();
  auto status = [&] {
    caf::scoped_actor self{sys};
    self->send(breaker.actor, status_atom_v);
    run();
    breaker_status out{};
    self->receive([&](const breaker_status& s) { out = s; },
                  caf::after(0s) >> [] {});
    return out;
  };
  REQUIRE(status().leases_held == 1);
  REQUIRE(status().subscribers == 2); // the fixture's listener and `both`
  advance(30s);                       // the lease lapses
  CHECK(status().leases_held == 0);
  caf::anon_send_exit(both, caf::exit_reason::kill);
  run();
  CHECK(status().subscribers == 1);
}

// -- one probe per cluster: the probe gate (the breaker relay in a node) ------
