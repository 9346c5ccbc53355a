// system_hold: a thread of our own that may touch actors keeps their actor
// system alive until it lets go -- the system's destructor waits for it.

#include "sluice/actors/loops/system_hold.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/http_source.hpp"
#include "sluice/messages/atoms.hpp"
#include "test_upstream.hpp"

using namespace std::chrono_literals;
using namespace sluice;

TEST_CASE("an actor system's destructor waits for a thread holding it") {
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys;
  sys.emplace(cfg);
  auto idle = sys->registry().running();
  std::atomic<bool> released{false};
  auto hold = std::make_unique<system_hold>(*sys);
  CHECK(sys->registry().running() == idle + 1);
  std::thread worker{[&released, h = std::move(hold)]() mutable {
    // Still working when the destructor starts; it must wait.
    std::this_thread::sleep_for(50ms);
    released = true;
    h.reset();
  }};
  sys.reset();
  CHECK(released); // without the hold the destructor returns at once
  worker.join();
}

TEST_CASE("an HTTP source's I/O thread counts as running until it is joined") {
  sluice::testing::test_upstream upstream;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto idle = sys.registry().running();
  http_source_config c;
  c.base_url = upstream.url();
  auto src = spawn_http_source(sys, c);
  caf::scoped_actor self{sys};
  // An answer: the actor has started, and with it its client.
  self->request(src.actor, 10s, attempt_atom_v, call_request{"/v1/ok", "{}"})
      .receive([](const source_reply& r) { CHECK(r.status == 200); },
               [](caf::error&) { FAIL("no reply"); });
  // The actor, its I/O thread and this scoped actor.
  CHECK(sys.registry().running() == idle + 3);
  self->monitor(src.actor);
  caf::anon_send_exit(src.actor, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
  // The state (and with it the client) is destroyed as the actor exits,
  // before its monitors hear of it; the count is back by then.
  CHECK(sys.registry().running() == idle + 1);
}
