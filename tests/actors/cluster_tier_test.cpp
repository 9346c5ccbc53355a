// The cluster tier over an in-memory lease store, in virtual time: FIFO
// waiters with deadlines, fail-closed when the store is down or too slow,
// permits that come back when their holder goes, renewals every third of a
// TTL.

#include "sluice/actors/cluster_tier.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "fakes/memory_lease_store.hpp"
#include "sluice/messages/admission.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

/// What one asker saw.
struct ask_report {
  std::optional<std::string> permit;
  caf::error error;
  bool decided = false;
  time_point decided_at{};
};

struct cluster_fixture : virtual_time_fixture {
  std::shared_ptr<memory_lease_store> store
      = std::make_shared<memory_lease_store>(2, 3s);
  std::shared_ptr<cluster_tier_stats> stats
      = std::make_shared<cluster_tier_stats>();
  caf::actor tier;

  cluster_fixture() {
    tier = spawn_cluster_tier(sys, cluster_tier_config{}, store, stats);
    run();
  }

  /// Every asker of the test, killed at its end (their permits come back).
  std::vector<caf::actor> askers;

  ~cluster_fixture() override {
    for (auto& a : askers)
      caf::anon_send_exit(a, caf::exit_reason::kill);
    caf::anon_send_exit(tier, caf::exit_reason::user_shutdown);
    run();
  }

  /// An actor that asks for a permit (waiting at most `wait`) and holds it
  /// until it is killed; its report is filled when the answer comes.
  std::pair<caf::actor, std::shared_ptr<ask_report>> ask(duration wait) {
    auto rep = std::make_shared<ask_report>();
    auto a = sys.spawn([t = tier, rep, wait](caf::event_based_actor* self) {
      self->request(t, caf::infinite, acquire_atom_v,
                    self->clock().now() + wait)
          .then(
              [self, rep](const std::string& permit) {
                rep->permit = permit;
                rep->decided = true;
                rep->decided_at = self->clock().now();
              },
              [self, rep](caf::error& err) {
                rep->error = std::move(err);
                rep->decided = true;
                rep->decided_at = self->clock().now();
              });
      return caf::behavior{[](int) {}};
    });
    run();
    askers.push_back(a);
    return {a, rep};
  }

  void kill(const caf::actor& a) {
    caf::anon_send_exit(a, caf::exit_reason::kill);
    run();
  }
};

bool is_busy(const caf::error& err) {
  return busy_tier(err) == tier_kind::global;
}

} // namespace

TEST_CASE_METHOD(cluster_fixture,
                 "the cluster tier grants up to the store's cap") {
  auto [a, ra] = ask(1s);
  auto [b, rb] = ask(1s);
  auto [c, rc] = ask(1s);
  CHECK(ra->permit);
  CHECK(rb->permit);
  CHECK_FALSE(rc->decided);
  CHECK(store->live() == 2);
  CHECK(stats->held == 2);
  CHECK(stats->waiting == 1);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a holder that terminates gives its permit back at once") {
  auto [a, ra] = ask(1s);
  auto [b, rb] = ask(1s);
  auto [c, rc] = ask(5s);
  REQUIRE_FALSE(rc->decided);
  auto before = now();
  kill(a);
  // Served at the instant the permit came back, not at the next poll.
  REQUIRE(rc->permit);
  CHECK(rc->decided_at == before);
  CHECK(store->releases == 1);
  CHECK(store->live() == 2);
  kill(b);
  kill(c);
  CHECK(store->live() == 0);
  CHECK(stats->held == 0);
}

TEST_CASE_METHOD(cluster_fixture, "cluster waiters are served in FIFO order") {
  auto [a, ra] = ask(10s);
  auto [b, rb] = ask(10s);
  auto [c, rc] = ask(10s);
  auto [d, rd] = ask(10s);
  auto [e, re] = ask(10s);
  kill(b);
  CHECK(rc->permit);
  CHECK_FALSE(rd->decided);
  CHECK_FALSE(re->decided);
  kill(a);
  CHECK(rd->permit);
  CHECK_FALSE(re->decided);
  kill(c);
  CHECK(re->permit);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a wait that outlasts its deadline is tool_busy naming "
                 "global, at its deadline") {
  auto [a, ra] = ask(1s);
  auto [b, rb] = ask(1s);
  auto start = now();
  auto [c, rc] = ask(300ms);
  advance(299ms);
  CHECK_FALSE(rc->decided);
  advance(1ms);
  REQUIRE(rc->decided);
  CHECK(is_busy(rc->error));
  CHECK(rc->decided_at == start + 300ms);
  CHECK(stats->errors == 0);
  CHECK(stats->waiting == 0);
}

TEST_CASE_METHOD(cluster_fixture,
                 "while the cluster is full the tier asks again every safety "
                 "poll, not in a loop") {
  auto [a, ra] = ask(60s);
  auto [b, rb] = ask(60s);
  auto [c, rc] = ask(60s);
  auto asked = store->acquires;
  advance(10 * cluster_tier_config{}.poll);
  CHECK(store->acquires - asked == 10);
  // Not in a loop: without a poll or a release, nothing more.
  run();
  CHECK(store->acquires - asked == 10);
}

TEST_CASE_METHOD(cluster_fixture,
                 "another node's release notice serves the first waiter at "
                 "once, not at the next poll") {
  auto other = store->take_elsewhere();
  store->take_elsewhere();
  auto start = now();
  auto [a, ra] = ask(60s);
  auto [b, rb] = ask(60s);
  REQUIRE_FALSE(ra->decided);
  auto asked = store->acquires;
  store->free_elsewhere(other);
  run();
  REQUIRE(ra->permit);
  CHECK(ra->decided_at == start);
  CHECK_FALSE(rb->decided);
  CHECK(stats->woken == 1);
  CHECK(store->acquires == asked + 2); // a's grant, then b's "full"
}

TEST_CASE_METHOD(cluster_fixture,
                 "a release notice with nobody waiting asks nothing") {
  auto [a, ra] = ask(1s);
  REQUIRE(ra->permit);
  auto before = store->acquires;
  store->free_elsewhere("p-none");
  run();
  CHECK(store->acquires == before);
  CHECK(stats->woken == 1);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a waiter asks again when the store says the earliest "
                 "permit lapses (its holder may have died)") {
  store->set_retry_in(300ms);
  auto dead = store->take_elsewhere();
  store->take_elsewhere();
  auto start = now();
  auto [a, ra] = ask(60s);
  auto asked = store->acquires;
  store->lapse(dead); // no notice: its node was killed
  advance(299ms);
  CHECK(store->acquires == asked);
  advance(1ms);
  REQUIRE(ra->permit);
  CHECK(ra->decided_at == start + 300ms);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a store naming an instant a moment away does not make "
                 "the waiters a busy loop") {
  store->set_retry_in(1ns);
  store->take_elsewhere();
  store->take_elsewhere();
  auto [a, ra] = ask(60s);
  auto asked = store->acquires;
  advance(100ms);
  CHECK(store->acquires - asked <= 10);
  CHECK(store->acquires - asked >= 5);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a store that is down fails acquires closed at once, "
                 "without asking it") {
  store->set_down(true);
  auto asked = store->acquires;
  auto start = now();
  auto [a, ra] = ask(1s);
  REQUIRE(ra->decided);
  CHECK(ra->decided_at == start);
  CHECK(is(ra->error, errc::governance_backend_error));
  CHECK_FALSE(is_busy(ra->error));
  CHECK(store->acquires == asked);
  CHECK(stats->errors == 1);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a store that goes down while callers wait fails them all "
                 "closed") {
  auto [a, ra] = ask(10s);
  auto [b, rb] = ask(10s);
  auto [c, rc] = ask(10s);
  auto [d, rd] = ask(10s);
  store->set_down(true);
  advance(cluster_tier_config{}.poll);
  REQUIRE(rc->decided);
  REQUIRE(rd->decided);
  CHECK(is(rc->error, errc::governance_backend_error));
  CHECK(is(rd->error, errc::governance_backend_error));
  CHECK(stats->waiting == 0);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a question the store holds past the deadline: busy if it "
                 "is up, fail-closed if it is down") {
  store->hold_answers(true);
  auto [a, ra] = ask(200ms);
  CHECK(store->last_within == 200ms);
  auto [b, rb] = ask(200ms);
  // One question at a time: b waits behind a's.
  CHECK(store->acquires == 1);
  advance(200ms + cluster_tier_config{}.poll);
  REQUIRE(ra->decided);
  REQUIRE(rb->decided);
  CHECK(is_busy(ra->error));
  CHECK(is_busy(rb->error));
  // The answer comes late: the permit it grants goes back to the store.
  CHECK(store->answer_held() == 1);
  run();
  CHECK(store->live() == 0);
  CHECK(store->releases == 1);
  CHECK(stats->held == 0);

  auto [c, rc] = ask(200ms);
  store->set_down(true);
  advance(200ms + cluster_tier_config{}.poll);
  REQUIRE(rc->decided);
  CHECK(is(rc->error, errc::governance_backend_error));
}

TEST_CASE_METHOD(cluster_fixture,
                 "held permits are renewed every third of the TTL, and one "
                 "the store lost no longer counts") {
  auto [a, ra] = ask(1s);
  auto [b, rb] = ask(1s);
  REQUIRE(ra->permit);
  CHECK(store->renewals == 0);
  advance(1s);
  CHECK(store->renewals == 1);
  advance(2s);
  CHECK(store->renewals == 3);
  store->lapse(*ra->permit);
  advance(1s);
  CHECK(stats->lost == 1);
  CHECK(stats->held == 1);
  // The lost permit is not given back: the store no longer has it.
  auto releases = store->releases;
  kill(a);
  CHECK(store->releases == releases);
  kill(b);
  CHECK(store->releases == releases + 1);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a holder of two permits that gives one back still returns "
                 "the other when it terminates") {
  auto got = std::make_shared<std::vector<std::string>>();
  auto two = sys.spawn([t = tier, got](caf::event_based_actor* self) {
    for (int i = 0; i < 2; ++i)
      self->request(t, caf::infinite, acquire_atom_v,
                    self->clock().now() + 1s)
          .then([got](const std::string& p) { got->push_back(p); });
    return caf::behavior{[self, t](int) {
      self->send(t, lease_release_atom_v, std::string{"p1"});
    }};
  });
  run();
  REQUIRE(got->size() == 2);
  caf::anon_send(two, 1);
  run();
  CHECK(store->live() == 1);
  kill(two);
  CHECK(store->live() == 0);
  CHECK(stats->held == 0);
}

TEST_CASE_METHOD(cluster_fixture,
                 "an answer that says the store failed fails every waiter "
                 "closed, before the store is marked down") {
  auto [a, ra] = ask(10s);
  auto [b, rb] = ask(10s);
  auto [c, rc] = ask(10s);
  auto [d, rd] = ask(10s);
  store->fail_next(true, false);
  advance(cluster_tier_config{}.poll);
  REQUIRE(rc->decided);
  REQUIRE(rd->decided);
  CHECK(is(rc->error, errc::governance_backend_error));
  CHECK(is(rd->error, errc::governance_backend_error));
  CHECK(stats->errors == 1);
}

TEST_CASE_METHOD(cluster_fixture,
                 "a question too late to ask is busy, not a store fault, and "
                 "the next waiter is asked for") {
  auto [a, ra] = ask(10s);
  auto [b, rb] = ask(10s);
  auto [c, rc] = ask(10s);
  auto [d, rd] = ask(10s);
  store->fail_next(false, true);
  advance(cluster_tier_config{}.poll);
  REQUIRE(rc->decided);
  CHECK(is_busy(rc->error));
  CHECK(stats->errors == 0);
  CHECK_FALSE(rd->decided);
  kill(a);
  CHECK(rd->permit);
}

TEST_CASE_METHOD(cluster_fixture,
                 "an anonymous acquire is refused without asking the store") {
  auto asked = store->acquires;
  caf::anon_send(tier, acquire_atom_v, now() + 1s);
  run();
  CHECK(store->acquires == asked);
  CHECK(stats->held == 0);
  CHECK(stats->waiting == 0);
  CHECK(store->live() == 0);
}

TEST_CASE_METHOD(cluster_fixture,
                 "nothing is renewed while nothing is held") {
  advance(10s);
  CHECK(store->renewals == 0);
}

TEST_CASE("the cluster tier refuses a null store and a zero poll") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  CHECK_THROWS_AS(spawn_cluster_tier(sys, cluster_tier_config{}, nullptr),
                  std::invalid_argument);
  cluster_tier_config bad;
  bad.poll = 0s;
  CHECK_THROWS_WITH(
      spawn_cluster_tier(sys, bad,
                         std::make_shared<memory_lease_store>(1, 1s)),
      Catch::Contains("poll"));
}
