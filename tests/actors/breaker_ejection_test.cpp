// Breakers under a route's ejection limit, as actors in virtual time: the
// second source's failures hold it in service, an upstream's Retry-After
// does not get round the limit, a closing (or an operator's reset) frees
// the slot, and a success never takes a held source out.

#include <chrono>
#include <memory>

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/breaker.hpp"
#include "sluice/messages/atoms.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

struct ejection_fixture : virtual_time_fixture {
  std::shared_ptr<shared_ejections> ejections =
      std::make_shared<shared_ejections>();
  breaker_handle x;
  breaker_handle y;

  ejection_fixture() {
    policy::breaker_config cfg;
    cfg.window_size = 2;
    cfg.min_samples = 2;
    cfg.failure_rate_threshold = 0.5;
    cfg.open_duration = 30s;
    x = spawn_breaker(sys, "x", cfg, ejections);
    y = spawn_breaker(sys, "y", cfg, ejections);
    ejections->with([](policy::ejection_ledger& l) {
      l.add_route("/r", {"x", "y"}, 50); // one of two may be out
    });
  }

  void outcome(const breaker_handle& b, policy::outcome_kind kind,
               std::optional<duration> retry_after = std::nullopt) {
    call_outcome o;
    o.generation = b.mirror->load().generation;
    o.kind = kind;
    o.elapsed = 10ms;
    if (retry_after)
      o.retry_after = now() + *retry_after;
    caf::anon_send(b.actor, record_atom_v, o);
    run();
  }

  void fail(const breaker_handle& b, int n = 1) {
    for (int i = 0; i < n; ++i)
      outcome(b, policy::outcome_kind::transient);
  }

  bool held(const std::string& s) {
    return ejections->with(
        [&](policy::ejection_ledger& l) { return l.held(s); });
  }
};

} // namespace

TEST_CASE_METHOD(ejection_fixture,
                 "ejection: past the limit a failing source is held in "
                 "service until a slot frees") {
  fail(x, 2);
  CHECK(x.is_open());
  fail(y, 3);
  CHECK_FALSE(y.is_open());
  CHECK(held("y"));
  // Retry-After on a failure does not get round the limit.
  outcome(y, policy::outcome_kind::transient, 60s);
  CHECK_FALSE(y.is_open());
  CHECK(held("y"));
  // x half-opens after 30 s (still out), then its probe succeeds: closed,
  // the slot is free, and y's next failure takes y out.
  advance(30s);
  // Under the testing scheduler the breaker runs only in run(): send,
  // run, then take the answer.
  caf::scoped_actor probe{sys};
  breaker_verdict v;
  probe->send(x.actor, allow_atom_v);
  run();
  probe->receive([&](const breaker_verdict& r) { v = r; },
                 caf::after(std::chrono::seconds{0}) >>
                     [] { FAIL("no verdict"); });
  REQUIRE(v.may_go());
  call_outcome ok;
  ok.generation = v.generation;
  ok.lease = v.lease;
  ok.kind = policy::outcome_kind::ok;
  caf::anon_send(x.actor, record_atom_v, ok);
  run();
  CHECK(x.mirror->load().state == breaker_state::closed);
  CHECK(held("y")); // still held until its next outcome
  fail(y);
  CHECK(y.is_open());
  CHECK_FALSE(held("y"));
  CHECK_FALSE(held("x"));
}

TEST_CASE_METHOD(ejection_fixture,
                 "ejection: a success never takes a held source out, and an "
                 "operator's reset clears the hold") {
  fail(x, 2);
  fail(y, 2);
  REQUIRE(held("y"));
  // The slot frees (an operator resets x) while y's window still holds two
  // failures: y's next outcome is a success -- it must not open y.
  caf::scoped_actor self{sys};
  self->send(x.actor, reset_atom_v);
  run();
  self->receive([](const breaker_status&) {},
                caf::after(std::chrono::seconds{0}) >>
                    [] { FAIL("no status"); });
  outcome(y, policy::outcome_kind::ok);
  CHECK_FALSE(y.is_open());
  // A reset of the held one clears its hold.
  fail(x, 2); // x out again
  fail(y, 2);
  REQUIRE(held("y"));
  self->send(y.actor, reset_atom_v);
  run();
  self->receive([](const breaker_status&) {},
                caf::after(std::chrono::seconds{0}) >>
                    [] { FAIL("no status"); });
  CHECK_FALSE(held("y"));
  CHECK_FALSE(y.is_open());
}

TEST_CASE_METHOD(ejection_fixture,
                 "ejection: a retired breaker (its source reloaded away) "
                 "neither counts nor frees a slot under its name") {
  fail(x, 2);
  CHECK(x.is_open());
  // Sources of /r counted out (x and y alone are in it).
  auto out = [&](const char*) {
    return ejections->with([&](policy::ejection_ledger& l) {
      for (auto& r : l.routes())
        if (r.route == "/r")
          return r.ejected;
      return uint32_t{99};
    });
  };
  CHECK(out("x") == 1);
  // A reload replaces x: its slot is free at once, for the new x ...
  REQUIRE(x.ejection_seat);
  x.ejection_seat->retire();
  CHECK(out("x") == 0);
  // ... and the old x, draining, moves nothing under the name: its
  // half-open (which counts as out) is not counted.
  advance(30s);
  CHECK(x.mirror->load().state == breaker_state::half_open);
  CHECK(out("x") == 0);
  // y may go now: x's slot is free.
  fail(y, 2);
  CHECK(y.is_open());
  CHECK(out("y") == 1);
}
