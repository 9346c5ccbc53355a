// The tier owner's message behaviour, in virtual time.

#include "sluice/actors/tier_owner.hpp"

#include <chrono>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

TEST_CASE_METHOD(virtual_time_fixture, "a tier reports its counts") {
  auto t = spawn_tier(sys, tier_kind::connection, 7);
  caf::scoped_actor self{sys};
  auto status = t.status();
  CHECK(status.kind == tier_kind::connection);
  CHECK(status.cap == 7);
  CHECK(status.in_use == 0);
  self->send(t.owner, status_atom_v);
  run();
  bool answered = false;
  self->receive(
      [&](const tier_status& s) {
        answered = true;
        CHECK(s.cap == 7);
      },
      caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK(answered);
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "a tier refuses a request whose deadline has already passed") {
  auto t = spawn_tier(sys, tier_kind::global, 1);
  caf::scoped_actor self{sys};
  self->send(t.owner, acquire_atom_v, now());
  run();
  bool refused = false;
  self->receive([](permit_id) {},
                [&](const caf::error& err) {
                  refused = busy_tier(err) == tier_kind::global;
                },
                caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK(refused);
  CHECK(t.status().in_use == 0);
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "a permit granted to a holder that already died comes back") {
  auto t = spawn_tier(sys, tier_kind::global, 1);
  // An actor that asks for a permit and dies before the answer arrives.
  auto asker = sys.spawn([t](caf::event_based_actor* self) {
    self->send(t.owner, acquire_atom_v, self->clock().now() + 3s);
    self->quit(caf::exit_reason::kill);
  });
  run();
  advance(5s);
  CHECK(t.status().in_use == 0);
  CHECK(t.status().waiting == 0);
}
