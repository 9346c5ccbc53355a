// The source gate in virtual time: it moves the source tier's cap with
// each attempt's outcome (AIMD) and wakes as many watchers as permits are
// free, longest-waiting first, each once.

#include "sluice/actors/source_gate.hpp"

#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/admission.hpp"
#include "sluice/messages/atoms.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

struct gate_fixture : virtual_time_fixture {
  std::shared_ptr<policy::tier_counter> tier
      = std::make_shared<policy::tier_counter>(1);
  caf::actor gate;

  explicit gate_fixture(uint32_t initial = 4) {
    policy::aimd_config aimd;
    aimd.initial = initial;
    aimd.min = 1;
    aimd.max = 8;
    gate = spawn_source_gate(sys, "primary", tier, aimd);
    run();
  }

  ~gate_fixture() override {
    caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
    run();
  }

  /// A watcher that asks to be told of the next freed permit and counts
  /// the notices it gets (with the source they name).
  caf::actor watcher(std::shared_ptr<std::vector<std::string>> seen) {
    auto a = sys.spawn([g = gate, seen](caf::event_based_actor* self) {
      self->send(g, watch_atom_v);
      return caf::behavior{
          [seen](freed_atom, const std::string& s) { seen->push_back(s); }};
    });
    run();
    return a;
  }
};

} // namespace

TEST_CASE_METHOD(gate_fixture, "the gate sets the tier's cap to the limit") {
  CHECK(tier->cap() == 4);
}

TEST_CASE_METHOD(gate_fixture,
                 "a 429 halves the source tier, a success at full use grows "
                 "it, a 5xx leaves it") {
  caf::anon_send(gate, aimd_atom_v, policy::outcome_kind::rate_limited,
                 uint32_t{4});
  run();
  CHECK(tier->cap() == 2);
  caf::anon_send(gate, aimd_atom_v, policy::outcome_kind::ok, uint32_t{2});
  run();
  CHECK(tier->cap() == 3);
  caf::anon_send(gate, aimd_atom_v, policy::outcome_kind::transient,
                 uint32_t{3});
  run();
  CHECK(tier->cap() == 3);
}

TEST_CASE_METHOD(gate_fixture,
                 "a freed permit wakes one watcher, the longest waiting, "
                 "once") {
  for (int i = 0; i < 4; ++i)
    REQUIRE(tier->try_acquire());
  auto first = std::make_shared<std::vector<std::string>>();
  auto second = std::make_shared<std::vector<std::string>>();
  auto a = watcher(first);
  auto b = watcher(second);
  tier->release();
  caf::anon_send(gate, wake_atom_v);
  run();
  CHECK(*first == std::vector<std::string>{"primary"});
  CHECK(second->empty());
  // One-shot: a second freed permit goes to the next watcher only.
  tier->release();
  caf::anon_send(gate, wake_atom_v);
  run();
  CHECK(first->size() == 1);
  CHECK(*second == std::vector<std::string>{"primary"});
  caf::anon_send_exit(a, caf::exit_reason::kill);
  caf::anon_send_exit(b, caf::exit_reason::kill);
  run();
}

TEST_CASE_METHOD(gate_fixture,
                 "no watcher is woken while the tier is full, and a watcher "
                 "that died is forgotten") {
  for (int i = 0; i < 4; ++i)
    REQUIRE(tier->try_acquire());
  auto dead_seen = std::make_shared<std::vector<std::string>>();
  auto live_seen = std::make_shared<std::vector<std::string>>();
  auto dead = watcher(dead_seen);
  auto live = watcher(live_seen);
  caf::anon_send(gate, wake_atom_v); // nothing is free
  run();
  CHECK(dead_seen->empty());
  CHECK(live_seen->empty());
  caf::anon_send_exit(dead, caf::exit_reason::kill);
  run();
  // The dead watcher's turn is not wasted on it.
  tier->release();
  caf::anon_send(gate, wake_atom_v);
  run();
  CHECK(*live_seen == std::vector<std::string>{"primary"});
  caf::anon_send_exit(live, caf::exit_reason::kill);
  run();
}

TEST_CASE_METHOD(gate_fixture, "an outcome that frees room wakes watchers") {
  for (int i = 0; i < 4; ++i)
    REQUIRE(tier->try_acquire());
  auto seen = std::make_shared<std::vector<std::string>>();
  auto w = watcher(seen);
  tier->release();
  // The attempt's outcome, its permit back: a success at 4 in flight grows
  // the limit to 8 (slow start: twice the calls in flight, also the max),
  // so five permits are free; the one watcher is woken.
  caf::anon_send(gate, aimd_atom_v, policy::outcome_kind::ok, uint32_t{4});
  run();
  CHECK(tier->cap() == 8);
  CHECK(seen->size() == 1);
  caf::anon_send_exit(w, caf::exit_reason::kill);
  run();
}

TEST_CASE_METHOD(gate_fixture, "the gate reports its tier") {
  REQUIRE(tier->try_acquire());
  caf::scoped_actor self{sys};
  self->send(gate, status_atom_v);
  run();
  bool answered = false;
  self->receive(
      [&](const gate_status& s) {
        answered = true;
        CHECK(s.cap == 4);
        CHECK(s.in_use == 1);
        CHECK(s.waiting == 0);
      },
      caf::after(0s) >> [] {});
  CHECK(answered);
  tier->release();
}

TEST_CASE("the gate refuses nonsense AIMD settings, naming the field") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  policy::aimd_config bad;
  bad.min = 0;
  CHECK_THROWS_AS(spawn_source_gate(sys, "x",
                                    std::make_shared<policy::tier_counter>(1),
                                    bad),
                  std::invalid_argument);
}
