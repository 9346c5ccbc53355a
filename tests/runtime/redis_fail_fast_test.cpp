// A frozen (SIGSTOP) or busy (DEBUG SLEEP) Redis against both of its users
// on the call path -- the cluster tier (leases, asked by every call) and the
// scope backend (the progress marker read) -- with a redis-server of the
// test's own: every call is answered governance_backend_error within one
// command timeout, at once while Redis is known to be down, and service
// resumes within a second of Redis answering again. Real time over
// loopback: the bounds are sanity checks, generous for a loaded machine,
// far below what queueing behind a blocked connection costs.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/runtime/redis/scope_backend.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/redis/client.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;

namespace {

using clock_type = std::chrono::steady_clock;

/// Callers at once: more than the cores, so answers queue if anything
/// serialises them.
constexpr int callers = 16;

/// How long each burst of calls goes on.
constexpr auto burst_length = 1500ms;

/// Over one command timeout that an answer may take: scheduling on a
/// loaded 2-core machine (a test under ASan included).
constexpr auto slack = 300ms;

/// The least rate of answers while Redis is down.
constexpr double min_rate = 1000.0;

struct burst_outcome {
  size_t calls = 0;
  size_t backend_errors = 0;
  clock_type::duration slowest{};
  double rate = 0; // answers per second
};

// `callers` threads run `one` (true: answered governance_backend_error)
// back to back for `burst_length`.
template <class F>
burst_outcome burst(F one) {
  std::mutex mx;
  burst_outcome out;
  auto t0 = clock_type::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i)
    threads.emplace_back([&] {
      size_t n = 0, errors = 0;
      clock_type::duration slowest{};
      while (clock_type::now() - t0 < burst_length) {
        auto start = clock_type::now();
        if (one())
          ++errors;
        slowest = std::max(slowest, clock_type::now() - start);
        ++n;
      }
      std::lock_guard<std::mutex> guard{mx};
      out.calls += n;
      out.backend_errors += errors;
      out.slowest = std::max(out.slowest, slowest);
    });
  for (auto& t : threads)
    t.join();
  auto took = std::chrono::duration<double>(clock_type::now() - t0).count();
  out.rate = static_cast<double>(out.calls) / took;
  return out;
}

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void check_failed_closed(const burst_outcome& b, duration command_timeout,
                         const char* what) {
  INFO(what << ": " << b.calls << " calls, " << b.backend_errors
            << " governance_backend_error, slowest " << ms(b.slowest) << " ms, "
            << b.rate << " calls/s");
  WARN(what << ": " << b.calls << " calls at " << b.rate << " calls/s, slowest "
            << ms(b.slowest) << " ms");
  CHECK(b.calls > 0);
  CHECK(b.backend_errors == b.calls);
  CHECK(b.slowest < command_timeout + slack);
  CHECK(b.rate >= min_rate);
}

// Time until `ok()` first holds, trying back to back (at most `limit`).
template <class F>
clock_type::duration time_to(F ok, clock_type::duration limit = 5s) {
  auto t0 = clock_type::now();
  while (clock_type::now() - t0 < limit) {
    if (ok())
      break;
    std::this_thread::sleep_for(5ms);
  }
  return clock_type::now() - t0;
}

// Keeps the server's only thread busy for `d` (DEBUG SLEEP) from a
// connection of its own, which waits it out.
std::thread debug_sleep(const test_redis& server, std::chrono::seconds d) {
  auto cfg = server.config();
  cfg.command_timeout = d + 5s;
  return std::thread{[cfg, d] {
    redis_client c{cfg};
    c.command({"DEBUG", "SLEEP", std::to_string(d.count())});
  }};
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;

  fixture()
      : sys(init(cfg)) {}

  static caf::actor_system_config& init(caf::actor_system_config& c) {
    add_error_category(c);
    return c;
  }
};

// A runtime whose every call takes a cluster lease from Redis.
struct cluster_node {
  std::unique_ptr<runtime> rt;

  cluster_node(caf::actor_system& sys, const redis_config& redis) {
    runtime_config rc;
    rc.redis = redis;
    rc.cluster_global_cap = 1000;
    rc.lease_ttl = 10s;
    // Long enough that calls queued behind a blocked Redis would show.
    rc.admission.wait_timeout = 2s;
    rt = std::make_unique<runtime>(sys, rc);
    sim_config quick;
    quick.phases[0].latency_min = quick.phases[0].latency_max = 1ms;
    rt->add_simulated_source("ok", quick);
    rt->add_route({"/r", "chat", {"ok"}, {}, {}});
  }

  call_result call() { return rt->call(call_request{"/r", "{}"}).get(); }

  bool backend_error() {
    return call().status == call_status::governance_backend_error;
  }
};

} // namespace

TEST_CASE_METHOD(fixture,
                 "Redis frozen: every call fails closed within one command "
                 "timeout, at once while it is down, and passes again within "
                 "1 s of the thaw",
                 "[redis][fail_fast]") {
  test_redis server;
  auto redis = server.config();
  cluster_node node{sys, redis};
  REQUIRE(node.call().ok());
  server.freeze();
  auto frozen = burst([&] { return node.backend_error(); });
  check_failed_closed(frozen, redis.command_timeout, "frozen");
  server.thaw();
  auto back = time_to([&] { return node.call().ok(); });
  WARN("thawed: calls pass again after " << ms(back) << " ms");
  CHECK(back < 1s);
}

TEST_CASE_METHOD(fixture,
                 "Redis busy (DEBUG SLEEP 3): calls fail closed within one "
                 "command timeout, not after the sleep",
                 "[redis][fail_fast]") {
  test_redis server;
  auto redis = server.config();
  cluster_node node{sys, redis};
  REQUIRE(node.call().ok());
  auto sleeper = debug_sleep(server, 3s);
  std::this_thread::sleep_for(50ms); // the server is asleep
  auto busy = burst([&] { return node.backend_error(); });
  check_failed_closed(busy, redis.command_timeout, "DEBUG SLEEP");
  sleeper.join(); // awake
  auto back = time_to([&] { return node.call().ok(); });
  WARN("awake: calls pass again after " << ms(back) << " ms");
  CHECK(back < 1s);
}

TEST_CASE_METHOD(fixture,
                 "the scope backend's progress read fails closed within one "
                 "command timeout while Redis is frozen or asleep",
                 "[redis][fail_fast]") {
  test_redis server;
  auto redis = server.config();
  auto backend = spawn_redis_scope_backend(sys, redis, 1h);
  auto read = [&] {
    caf::scoped_actor self{sys};
    caf::expected<progress_age> out{progress_age{}};
    self->request(backend, 10s, progress_age_atom_v, std::string{"s"})
        .receive([&](progress_age& a) { out = a; },
                 [&](caf::error& e) { out = std::move(e); });
    return out;
  };
  auto read_fails = [&] {
    auto r = read();
    return !r && is(r.error(), errc::governance_backend_error);
  };
  auto read_ok = [&] { return static_cast<bool>(read()); };
  REQUIRE(read_ok());
  SECTION("frozen") {
    server.freeze();
    auto frozen = burst(read_fails);
    check_failed_closed(frozen, redis.command_timeout, "frozen, reads");
    server.thaw();
    auto back = time_to(read_ok);
    WARN("thawed: reads pass again after " << ms(back) << " ms");
    CHECK(back < 1s);
  }
  SECTION("asleep") {
    auto sleeper = debug_sleep(server, 3s);
    std::this_thread::sleep_for(50ms);
    auto busy = burst(read_fails);
    check_failed_closed(busy, redis.command_timeout, "DEBUG SLEEP, reads");
    sleeper.join();
    auto back = time_to(read_ok);
    WARN("awake: reads pass again after " << ms(back) << " ms");
    CHECK(back < 1s);
  }
  caf::anon_send_exit(backend, caf::exit_reason::user_shutdown);
}
