// The loop scheduler's tests' shared part: a system on loops, an echo actor.

#pragma once

#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;

namespace loop_scheduler_test_support {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

struct loops_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  explicit loops_fixture(size_t loops = 2) {
    use_loop_scheduler(cfg, loops);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  loop_scheduler& scheduler() {
    return dynamic_cast<loop_scheduler&>(sys->scheduler());
  }
};

// Answers each ping with the id of the thread it ran on.
inline caf::behavior echo_thread(caf::event_based_actor*) {
  return {
      [](ping_atom) {
        return std::hash<std::thread::id>{}(std::this_thread::get_id());
      },
  };
}

} // namespace loop_scheduler_test_support
