// The Redis tests' shared part: waiting for a condition, the breaker
// channel's listeners, and the fixtures with actors over a test Redis.

#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/redis/breaker_relay.hpp"
#include "sluice/runtime/redis/client.hpp"
#include "sluice/runtime/redis/lease_pool.hpp"
#include "sluice/runtime/redis/scope_backend.hpp"
#include "sluice/runtime/redis/subscriber.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;

namespace redis_test_support {

using clock_type = std::chrono::steady_clock;

// Retries `f` until it is true or `limit` passes.
template <class F>
inline bool eventually(F f, std::chrono::milliseconds limit = 5000ms) {
  auto end = clock_type::now() + limit;
  while (clock_type::now() < end) {
    if (f())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

// How many connections listen on the relay's channel (PUBSUB NUMSUB): a
// relay's listener has subscribed once it counts.
inline long long breaker_listeners(const test_redis& server) {
  redis_client c{server.config()};
  auto r =
      c.command({"PUBSUB", "NUMSUB", server.config().key_prefix + "breakers"});
  if (!r.ok() || r.reply->elements.size() != 2)
    return -1;
  return r.reply->elements[1].integer;
}

// Nodes sharing breakers on `server`: one attempt per call, a call with no
// runnable source ends after 1 s; a source whose breaker 4 failures open
// (for `open_for`); and a simulated upstream that always fails.
struct shared_breaker_setup {
  runtime_config rc;
  source_settings s;
  sim_config failing;

  shared_breaker_setup(const test_redis& server, duration open_for) {
    rc.redis = server.config();
    rc.kinds["chat"].max_attempts = 1;
    rc.kinds["chat"].stall_window = 1s;
    rc.kinds["chat"].poll_interval = 200ms;
    s.breaker.window_size = 4;
    s.breaker.min_samples = 4;
    s.breaker.failure_rate_threshold = 0.5;
    s.breaker.open_duration = open_for;
    failing.phases[0].transient_rate = 1.0;
  }

  // A node with source "x" on route "/x".
  std::unique_ptr<runtime> node(caf::actor_system& sys) const {
    auto n = std::make_unique<runtime>(sys, rc);
    n->add_simulated_source("x", failing, s);
    n->add_route({"/x", "chat", {"x"}, {}, {}});
    return n;
  }
};

struct actor_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;

  actor_fixture()
      : sys(init(cfg)) {}

  static caf::actor_system_config& init(caf::actor_system_config& c) {
    add_error_category(c);
    return c;
  }

  // Asks a backend for a scope's age: the age, or the error.
  caf::expected<progress_age> age(const caf::actor& backend,
                                  const std::string& scope) {
    caf::scoped_actor self{sys};
    caf::expected<progress_age> out{progress_age{}};
    self->request(backend, 5s, progress_age_atom_v, scope)
        .receive([&](progress_age& a) { out = a; },
                 [&](caf::error& e) { out = std::move(e); });
    return out;
  }
};

} // namespace redis_test_support
