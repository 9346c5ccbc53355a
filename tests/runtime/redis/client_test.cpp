// redis_worker: its thread outlives a worker destroyed on that very thread
// (a job's answer dropped the last reference to the actor owning it), and
// holds its actor system until it ends. No Redis is needed: nothing here
// sends a command.

#include "sluice/runtime/redis/client.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;

namespace {

redis_config nowhere() {
  redis_config cfg;
  cfg.host = "127.0.0.1";
  cfg.port = 1; // nothing listens there; no job here speaks to it
  return cfg;
}

} // namespace

TEST_CASE("a redis worker destroyed by its own job ends cleanly") {
  // Under ASan this was a use of the freed worker: its loop read the
  // connection's fault count and locked its mutex after the job returned.
  std::atomic<bool> ran{false};
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto idle = sys.registry().running();
    auto worker = std::make_unique<redis_worker>(nowhere(), "test", &sys);
    CHECK(sys.registry().running() == idle + 1); // its thread holds `sys`
    auto* raw = worker.get();
    std::unique_ptr<redis_worker> owner = std::move(worker);
    raw->submit(
        steady::now() + 10s,
        [&owner, &ran](redis_client&) {
          owner.reset(); // on the worker's own thread
          ran = true;
        },
        [](const std::string&) {});
    // Until the job ran: destroying `owner` here would join the thread
    // first (and the job would not run).
    while (!ran)
      std::this_thread::yield();
    // The system's destructor waits for the detached thread to finish.
  }
  CHECK(ran);
}

TEST_CASE("a redis worker joins its thread when destroyed elsewhere") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto idle = sys.registry().running();
  std::atomic<int> runs{0};
  {
    redis_worker worker{nowhere(), "test", &sys};
    worker.submit(
        steady::now() + 10s, [&runs](redis_client&) { ++runs; },
        [](const std::string&) {});
  }
  // Joined: the hold is back, whether or not the job ran before the stop.
  CHECK(sys.registry().running() == idle);
  CHECK(runs <= 1);
}
