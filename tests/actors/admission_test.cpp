// Three-tier admission under one deadline, in virtual time (SPEC §1).

#include "sluice/actors/admission.hpp"

#include <chrono>

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "admission_holder.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

struct fixture : virtual_time_fixture {
  duration wait_timeout = 3s;

  tier_handle tier(tier_kind kind, uint32_t cap) {
    return spawn_tier(sys, kind, cap);
  }

  admission_path path(uint32_t session_cap, uint32_t connection_cap,
                      uint32_t global_cap) {
    return {tier(tier_kind::session, session_cap),
            tier(tier_kind::connection, connection_cap),
            tier(tier_kind::global, global_cap)};
  }

  holder ask(const admission_path& p) {
    auto h = spawn_holder(sys, p, wait_timeout);
    caf::anon_send(h.actor, ask_atom::value);
    run();
    return h;
  }

  void give_back(const holder& h) {
    caf::anon_send(h.actor, give_back_atom::value);
    run();
  }

  void kill(const holder& h) {
    caf::anon_send_exit(h.actor, caf::exit_reason::kill);
    run();
  }
};

uint32_t in_use(const tier_handle& t) {
  return t.status().in_use;
}

uint32_t waiting(const tier_handle& t) {
  return t.status().waiting;
}

} // namespace

TEST_CASE_METHOD(fixture,
                 "a free path admits at once through all three tiers") {
  auto p = path(16, 256, 1024);
  auto h = ask(p);
  REQUIRE(h.report->admitted);
  CHECK(h.report->decided_at == now());
  CHECK(in_use(p.session) == 1);
  CHECK(in_use(p.connection) == 1);
  CHECK(in_use(p.global) == 1);
  give_back(h);
  CHECK(in_use(p.session) == 0);
  CHECK(in_use(p.connection) == 0);
  CHECK(in_use(p.global) == 0);
}

TEST_CASE_METHOD(fixture, "the longest admission wait is one wait_timeout") {
  // Session free; the connection frees at 2.5 s; global never frees. The call
  // must be rejected at 3.0 s naming `global` -- not at 3 s per tier (9 s).
  auto session = tier(tier_kind::session, 16);
  auto connection = tier(tier_kind::connection, 1);
  auto global = tier(tier_kind::global, 1);
  auto spare = path(16, 16, 16);
  auto holds_connection = ask({spare.session, connection, spare.global});
  auto holds_global = ask({spare.session, spare.connection, global});
  REQUIRE(holds_connection.report->admitted);
  REQUIRE(holds_global.report->admitted);

  auto t0 = now();
  auto call = ask({session, connection, global});
  CHECK_FALSE(call.report->decided);
  CHECK(in_use(session) == 1);
  CHECK(waiting(connection) == 1);

  advance(2500ms);
  give_back(holds_connection);
  CHECK_FALSE(call.report->decided);
  CHECK(in_use(connection) == 1); // the call took the freed permit
  CHECK(waiting(global) == 1);

  advance_to(t0 + 3s - 1ms);
  CHECK_FALSE(call.report->decided);
  advance(1ms);
  REQUIRE(call.report->decided);
  CHECK_FALSE(call.report->admitted);
  CHECK(call.report->busy() == tier_kind::global);
  CHECK(call.report->decided_at == t0 + 3s);
  // Permits taken from session and connection are back; global is unchanged.
  CHECK(in_use(session) == 0);
  CHECK(in_use(connection) == 0);
  CHECK(in_use(global) == 1);
  CHECK(waiting(global) == 0);
}

TEST_CASE_METHOD(fixture,
                 "the ticket carries the one deadline admit computed") {
  // A later tier (the cluster's) waits until this instant: the call's
  // start plus one wait_timeout, however long the local tiers took.
  auto connection = tier(tier_kind::connection, 1);
  auto spare = path(16, 16, 16);
  auto holds_connection = ask({spare.session, connection, spare.global});
  REQUIRE(holds_connection.report->admitted);
  CHECK(holds_connection.report->deadline == now() + wait_timeout);

  auto t0 = now();
  auto call = ask({spare.session, connection, spare.global});
  REQUIRE(call.report->progress);
  CHECK(call.report->progress->deadline() == t0 + wait_timeout);
  advance(1500ms);
  give_back(holds_connection);
  REQUIRE(call.report->admitted);
  CHECK(call.report->decided_at == t0 + 1500ms);
  CHECK(call.report->deadline == t0 + wait_timeout);
}

TEST_CASE_METHOD(fixture, "a rejection names the tier that was full") {
  auto p = path(1, 16, 16);
  auto first = ask(p);
  REQUIRE(first.report->admitted);
  auto second = ask(p);
  advance(3s);
  REQUIRE(second.report->decided);
  CHECK(second.report->busy() == tier_kind::session);
  CHECK(is(second.report->error, errc::tool_busy));
  CHECK(in_use(p.connection) == 1);
  CHECK(in_use(p.global) == 1);
}

TEST_CASE_METHOD(fixture, "waiters are served in FIFO order") {
  auto p = path(16, 16, 1);
  auto h0 = ask(p);
  REQUIRE(h0.report->admitted);
  auto h1 = ask(p);
  advance(100ms);
  auto h2 = ask(p);
  advance(100ms);
  auto h3 = ask(p);
  CHECK(waiting(p.global) == 3);

  give_back(h0);
  CHECK(h1.report->admitted);
  CHECK_FALSE(h2.report->decided);
  CHECK_FALSE(h3.report->decided);
  give_back(h1);
  CHECK(h2.report->admitted);
  CHECK_FALSE(h3.report->decided);
  give_back(h2);
  CHECK(h3.report->admitted);
  CHECK(in_use(p.global) == 1);
  CHECK(waiting(p.global) == 0);
}

TEST_CASE_METHOD(fixture,
                 "an expired waiter never takes a permit freed after its "
                 "deadline") {
  auto p = path(16, 16, 1);
  auto h0 = ask(p);
  auto t0 = now();
  auto late = ask(p);
  advance(3s);
  REQUIRE(late.report->decided);
  CHECK(late.report->busy() == tier_kind::global);
  CHECK(late.report->decided_at == t0 + 3s);

  advance(100ms);
  auto next = ask(p);
  advance(400ms);
  give_back(h0);
  CHECK_FALSE(late.report->admitted);
  CHECK(next.report->admitted);
  CHECK(in_use(p.global) == 1);
  CHECK(waiting(p.global) == 0);
}

TEST_CASE_METHOD(fixture,
                 "a permit freed at the very instant of a deadline does not go "
                 "to that waiter") {
  auto p = path(16, 16, 1);
  auto h0 = ask(p);
  auto t0 = now();
  auto w = ask(p);
  // Put the clock on the deadline without firing the waiter's timer, then
  // free the permit: the release is processed before the timer message.
  sched.clock().current_time = t0 + 3s;
  give_back(h0);
  REQUIRE(w.report->decided);
  CHECK_FALSE(w.report->admitted);
  CHECK(w.report->busy() == tier_kind::global);
  CHECK(in_use(p.global) == 0);
  CHECK(waiting(p.global) == 0);
  advance(1s); // the stale timer fires and changes nothing
  CHECK(in_use(p.global) == 0);
}

TEST_CASE_METHOD(fixture,
                 "a holder killed while holding all three tiers returns every "
                 "permit") {
  auto p = path(4, 4, 4);
  auto other = ask(p); // the counts the call must return to
  auto before = std::make_tuple(in_use(p.session), in_use(p.connection),
                                in_use(p.global));
  auto h = ask(p);
  REQUIRE(h.report->admitted);
  CHECK(in_use(p.global) == std::get<2>(before) + 1);
  kill(h);
  CHECK(std::make_tuple(in_use(p.session), in_use(p.connection),
                        in_use(p.global)) == before);
  CHECK(other.report->admitted);
}

TEST_CASE_METHOD(fixture,
                 "a holder killed while waiting leaves the queue and returns "
                 "what it took") {
  auto p = path(4, 4, 1);
  auto h0 = ask(p);
  auto h = ask(p); // holds session and connection, waits on global
  REQUIRE_FALSE(h.report->decided);
  CHECK(in_use(p.session) == 2);
  CHECK(in_use(p.connection) == 2);
  CHECK(waiting(p.global) == 1);
  kill(h);
  CHECK(in_use(p.session) == 1);
  CHECK(in_use(p.connection) == 1);
  CHECK(waiting(p.global) == 0);
  // The next waiter gets the global permit when it frees; nothing was lost
  // to the dead waiter.
  auto next = ask(p);
  give_back(h0);
  CHECK(next.report->admitted);
  CHECK(in_use(p.global) == 1);
}

TEST_CASE_METHOD(fixture,
                 "a call never holds a more global permit while waiting on a "
                 "more local one") {
  auto p = path(16, 1, 16);
  auto spare = path(16, 16, 16);
  auto blocker = ask({spare.session, p.connection, spare.global});
  REQUIRE(blocker.report->admitted);
  auto global_before = in_use(p.global);
  auto call = ask(p);
  REQUIRE_FALSE(call.report->decided);
  CHECK(in_use(p.session) == 1);
  CHECK(waiting(p.connection) == 1);
  CHECK(in_use(p.global) == global_before);
  advance(1500ms);
  CHECK(in_use(p.global) == global_before);
  give_back(blocker);
  CHECK(call.report->admitted);
  CHECK(in_use(p.global) == global_before + 1);
}

TEST_CASE_METHOD(fixture, "releasing twice returns each permit once") {
  auto p = path(4, 4, 4);
  auto other = ask(p);
  auto h = ask(p);
  give_back(h);
  give_back(h);
  CHECK(in_use(p.session) == 1);
  CHECK(in_use(p.connection) == 1);
  CHECK(in_use(p.global) == 1);
  kill(h); // termination after release returns nothing more
  CHECK(in_use(p.global) == 1);
  CHECK(other.report->admitted);
}

TEST_CASE_METHOD(fixture, "a finished call returns its permits") {
  auto p = path(1, 1, 1);
  auto h = ask(p);
  caf::anon_send(h.actor, finish_atom::value);
  run();
  CHECK(in_use(p.session) == 0);
  CHECK(in_use(p.connection) == 0);
  CHECK(in_use(p.global) == 0);
  auto again = ask(p);
  CHECK(again.report->admitted);
}
