// redis_worker: its thread outlives a worker destroyed on that very thread
// (a job's answer dropped the last reference to the actor owning it), and
// holds its actor system until it ends (no Redis needed: nothing sends a
// command). Then, on a manual clock against a redis-server of the test's
// own ("[redis]"), the timing the client and worker own -- down and up,
// the PING pause, stale jobs, the reconnect pause -- without a real wait:
// time moves only when the test advances it. Hiredis's socket timeouts stay
// real; they are long here, so a loaded machine does not trip them.

#include "sluice/runtime/redis/client.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>

#include "fakes/manual_redis_clock.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::manual_redis_clock;
using sluice::testing::test_redis;

namespace {

redis_config nowhere() {
  redis_config cfg;
  cfg.host = "127.0.0.1";
  cfg.port = 1; // nothing listens there; no job here speaks to it
  return cfg;
}

// The test server's config with real timeouts long enough for any load: a
// socket timeout here would be a fault the test did not ask for.
redis_config patient(const test_redis& server) {
  auto cfg = server.config();
  cfg.connect_timeout = 5s;
  cfg.command_timeout = 5s;
  // Virtual: had anything waited it in real time, the test would not end.
  cfg.reconnect_after = 10min;
  return cfg;
}

// How many times the server ran `command` since its stats were reset.
long long calls(redis_client& observer, const std::string& command) {
  auto r = observer.command({"INFO", "commandstats"});
  if (!r.ok())
    return -1;
  auto tag = "cmdstat_" + command + ":calls=";
  auto at = r.reply->text.find(tag);
  return at == std::string::npos
             ? 0
             : std::stoll(r.reply->text.substr(at + tag.size()));
}

// Polls `f` (an outcome of the worker's thread) for at most `limit` of real
// time: what is awaited is an event, not a duration.
template <class F>
bool soon(F f, std::chrono::milliseconds limit = 5000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() >= end)
      return false;
    std::this_thread::yield();
  }
  return true;
}

// What the jobs and refusals of one test saw, from the worker's thread;
// made before the worker, so it outlives the worker's last job.
struct observed {
  std::mutex mx;
  std::condition_variable cv;
  bool release = false;
  std::optional<std::string> refusal;
  std::thread::id refused_on;
  std::atomic<bool> ran{false};
  std::atomic<bool> done{false};

  void refuse(const std::string& why) {
    std::lock_guard<std::mutex> guard{mx};
    refusal = why;
    refused_on = std::this_thread::get_id();
  }

  std::optional<std::string> why() {
    std::lock_guard<std::mutex> guard{mx};
    return refusal;
  }
};

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

TEST_CASE("a redis worker marked down refuses at once and PINGs only once "
          "reconnect_after has passed in virtual time",
          "[redis]") {
  test_redis server;
  auto clock = std::make_shared<manual_redis_clock>();
  observed fault, refused, after;
  redis_worker worker{patient(server), "test", nullptr, clock};
  redis_client observer{server.config()};
  REQUIRE(observer.command({"CONFIG", "RESETSTAT"}).ok());
  // A fault with Redis up: the job's connection closes under it.
  worker.submit(
      clock->now() + 1h,
      [&fault](redis_client& c) {
        c.command({"QUIT"});
        fault.ran = !c.command({"GET", c.key("k")}).ok();
      },
      [&fault](const std::string& why) { fault.refuse(why); });
  // Down: the worker waits on the clock for its first PING.
  REQUIRE(clock->await_waiters(1));
  CHECK(fault.ran);
  CHECK(worker.down());
  // A job submitted now is refused on the caller's thread, not queued.
  worker.submit(
      clock->now() + 1h, [&refused](redis_client&) { refused.ran = true; },
      [&refused](const std::string& why) { refused.refuse(why); });
  auto why = refused.why();
  REQUIRE(why.has_value());
  CHECK(why->rfind(redis_worker::down_refusal, 0) == 0);
  CHECK(refused.refused_on == std::this_thread::get_id());
  // Up to a hair before the pause ends: woken, it looked and waits on.
  clock->advance(10min - 1ns);
  REQUIRE(clock->await_waiters(1));
  CHECK(calls(observer, "ping") == 0);
  CHECK(worker.down());
  // The pause is over: one PING, answered, and the worker is up.
  clock->advance(1ns);
  REQUIRE(soon([&] { return !worker.down(); }));
  CHECK(calls(observer, "ping") == 1);
  CHECK(clock->expired() == 1);
  worker.submit(
      clock->now() + 1h,
      [&after](redis_client& c) {
        after.ran = c.command({"GET", c.key("k")}).ok();
        after.done = true;
      },
      [&after](const std::string& why) {
        after.refuse(why);
        after.done = true;
      });
  REQUIRE(soon([&] { return after.done.load(); }));
  CHECK(after.ran);
  CHECK_FALSE(after.why().has_value());
  CHECK_FALSE(refused.ran);
}

TEST_CASE("a redis worker keeps PINGing every reconnect_after in virtual time "
          "while Redis does not answer",
          "[redis]") {
  test_redis server;
  auto clock = std::make_shared<manual_redis_clock>();
  auto cfg = patient(server);
  redis_worker worker{cfg, "test", nullptr, clock};
  std::atomic<bool> faulted{false};
  server.stop();
  worker.submit(
      clock->now() + 1h,
      [&faulted](redis_client& c) { faulted = !c.command({"PING"}).ok(); },
      [](const std::string&) {});
  REQUIRE(clock->await_waiters(1));
  CHECK(faulted);
  CHECK(clock->expired() == 0);
  // Each interval: one PING, refused at once (nothing listens), and the
  // next one a full interval later.
  for (size_t round = 1; round <= 3; ++round) {
    clock->advance(cfg.reconnect_after);
    REQUIRE(clock->await_waiters(1));
    CHECK(clock->expired() == round);
    CHECK(worker.down());
  }
  // Woken a hair early, it sends nothing: the count stays.
  clock->advance(cfg.reconnect_after - 1ns);
  REQUIRE(clock->await_waiters(1));
  CHECK(clock->expired() == 3);
  server.start();
  clock->advance(1ns);
  REQUIRE(soon([&] { return !worker.down(); }));
  CHECK(clock->expired() == 4);
}

TEST_CASE("a job whose deadline passes in virtual time while it is queued is "
          "refused without being sent",
          "[redis]") {
  test_redis server;
  auto clock = std::make_shared<manual_redis_clock>();
  observed first, stale, fresh;
  redis_worker worker{patient(server), "test", nullptr, clock};
  redis_client observer{server.config()};
  REQUIRE(observer.command({"CONFIG", "RESETSTAT"}).ok());
  auto t0 = clock->now();
  // Holds the worker until released, so the next two queue behind it.
  worker.submit(
      t0 + 1h,
      [&first](redis_client&) {
        std::unique_lock<std::mutex> lk{first.mx};
        // Generous: a loaded machine must not let it go before the test
        // has moved the clock.
        first.cv.wait_for(lk, 60s, [&first] { return first.release; });
        first.ran = true;
      },
      [&first](const std::string& why) { first.refuse(why); });
  worker.submit(
      t0 + 100ms,
      [&stale](redis_client& c) {
        c.command({"ECHO", "stale"});
        stale.ran = true;
      },
      [&stale](const std::string& why) {
        stale.refuse(why);
        stale.done = true;
      });
  worker.submit(
      t0 + 1h,
      [&fresh](redis_client& c) {
        fresh.ran = c.command({"ECHO", "fresh"}).ok();
        fresh.done = true;
      },
      [&fresh](const std::string& why) {
        fresh.refuse(why);
        fresh.done = true;
      });
  // Past the second's deadline, not the third's, before either started.
  clock->advance(200ms);
  {
    std::lock_guard<std::mutex> guard{first.mx};
    first.release = true;
  }
  first.cv.notify_all();
  REQUIRE(soon([&] { return fresh.done.load(); }));
  CHECK(first.ran);
  CHECK_FALSE(stale.ran);
  REQUIRE(stale.done);
  auto why = stale.why();
  REQUIRE(why.has_value());
  CHECK(why->rfind("redis too slow", 0) == 0);
  CHECK(fresh.ran);
  CHECK_FALSE(fresh.why().has_value());
  CHECK(calls(observer, "echo") == 1); // only the fresh job's reached Redis
  CHECK_FALSE(worker.down());
}

TEST_CASE("a redis client does not retry a failed connect within "
          "reconnect_after in virtual time and does after",
          "[redis]") {
  test_redis server;
  auto clock = std::make_shared<manual_redis_clock>();
  auto cfg = patient(server);
  redis_client c{cfg, clock};
  server.stop();
  auto refused = c.command({"PING"});
  CHECK_FALSE(refused.ok());
  CHECK(refused.fault);
  CHECK(refused.error.rfind("redis connect to", 0) == 0);
  // Redis is back, but the pause is not over: not even tried.
  server.start();
  auto early = c.command({"PING"});
  CHECK_FALSE(early.ok());
  CHECK(early.fault);
  CHECK(early.error == "redis unreachable (not retrying yet)");
  clock->advance(cfg.reconnect_after - 1ns);
  CHECK(c.command({"PING"}).error == "redis unreachable (not retrying yet)");
  CHECK_FALSE(c.connected());
  CHECK(c.faults() == 3);
  clock->advance(1ns);
  auto again = c.command({"PING"});
  CHECK(again.ok());
  CHECK(c.connected());
  CHECK(c.faults() == 3);
}

TEST_CASE("a redis client's deadline is on its clock", "[redis]") {
  test_redis server;
  auto clock = std::make_shared<manual_redis_clock>();
  redis_client c{patient(server), clock};
  REQUIRE(c.command({"PING"}).ok());
  // Far off in real time, passed in virtual time: not sent.
  c.set_deadline(clock->now() + 1h);
  CHECK(c.command({"PING"}).ok());
  clock->advance(1h);
  auto late = c.command({"PING"});
  CHECK_FALSE(late.ok());
  CHECK_FALSE(late.fault);
  CHECK(late.error == "redis: deadline passed before the command was sent");
}
