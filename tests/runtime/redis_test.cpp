// The Redis backend against a redis-server of the test's own: the client
// (scripts, reconnecting after a restart), the scope backend shared by two
// nodes (progress seen across them, fail-closed while Redis is down,
// recovery with no manual step), and the stall verdict across two runtimes.
// Real time: Redis has its own clock; windows are kept short.

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "actors/scope_backend.hpp"
#include "messages/atoms.hpp"
#include "messages/errors.hpp"
#include "runtime/redis_client.hpp"
#include "runtime/runtime.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;

namespace {

using clock_type = std::chrono::steady_clock;

// Retries `f` until it is true or `limit` passes.
template <class F>
bool eventually(F f, std::chrono::milliseconds limit = 5000ms) {
  auto end = clock_type::now() + limit;
  while (clock_type::now() < end) {
    if (f())
      return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

struct actor_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;

  actor_fixture() : sys(init(cfg)) {}

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

} // namespace

TEST_CASE("redis_client runs commands and scripts and reconnects after the "
          "server restarts",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  REQUIRE(c.command({"SET", c.key("k"), "v"}).ok());
  auto got = c.command({"GET", c.key("k")});
  REQUIRE(got.ok());
  CHECK(got.reply->text == "v");
  auto sum = c.eval("return tonumber(ARGV[1]) + tonumber(ARGV[2])", {},
                    {"40", "2"});
  REQUIRE(sum.ok());
  CHECK(sum.reply->integer == 42);
  // A server error is an error, not a reply.
  auto bad = c.command({"INCR", c.key("k")});
  CHECK_FALSE(bad.ok());
  CHECK_FALSE(bad.error.empty());
  // Down: errors, quickly (the timeouts are 200 ms).
  server.stop();
  auto t0 = clock_type::now();
  auto down = c.command({"GET", c.key("k")});
  CHECK_FALSE(down.ok());
  CHECK(clock_type::now() - t0 < 2s);
  // Back (empty: nothing persisted): the same client works again, and the
  // script is loaded anew (the new server has never seen it).
  server.start();
  CHECK(eventually([&] { return c.command({"PING"}).ok(); }));
  auto again = c.eval("return tonumber(ARGV[1]) + tonumber(ARGV[2])", {},
                      {"1", "2"});
  REQUIRE(again.ok());
  CHECK(again.reply->integer == 3);
  redis_config nameless;
  nameless.host.clear();
  CHECK_THROWS_WITH(redis_client{nameless}, Catch::StartsWith("address:"));
}

TEST_CASE_METHOD(actor_fixture,
                 "the Redis backend shares scope progress between nodes and "
                 "fails closed while Redis is down",
                 "[redis]") {
  test_redis server;
  auto stats = std::make_shared<redis_backend_stats>();
  auto node_a = spawn_redis_scope_backend(sys, server.config(), 1h, stats);
  auto node_b = spawn_redis_scope_backend(sys, server.config(), 1h);
  // Never progressed: +infinity.
  auto never = age(node_b, "shared");
  REQUIRE(never);
  CHECK_FALSE(never->age.has_value());
  // A success on node A is seen by node B.
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  REQUIRE(eventually([&] {
    auto a = age(node_b, "shared");
    return a && a->age.has_value();
  }));
  auto seen = age(node_b, "shared");
  REQUIRE(seen);
  CHECK(*seen->age < 2s);
  // Another prefix is another deployment: it sees nothing.
  auto other = spawn_redis_scope_backend(sys, server.config("other:"), 1h);
  auto elsewhere = age(other, "shared");
  REQUIRE(elsewhere);
  CHECK_FALSE(elsewhere->age.has_value());
  // Redis down: reads fail closed, quickly; writes are only counted.
  server.stop();
  auto t0 = clock_type::now();
  auto failed = age(node_a, "shared");
  REQUIRE_FALSE(failed);
  CHECK(is(failed.error(), errc::governance_backend_error));
  CHECK(clock_type::now() - t0 < 2s);
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  CHECK(eventually([&] { return stats->write_errors >= 1; }));
  CHECK(stats->read_errors >= 1);
  // Redis back: service resumes with no manual step (the restarted server
  // is empty, so the scope never progressed).
  server.start();
  CHECK(eventually([&] { return static_cast<bool>(age(node_a, "shared")); }));
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  CHECK(eventually([&] {
    auto a = age(node_b, "shared");
    return a && a->age.has_value();
  }));
  for (auto& b : {node_a, node_b, other})
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture,
                 "a success on node A clears the stall condition for a call "
                 "on node B",
                 "[redis]") {
  test_redis server;
  runtime_config rc;
  rc.redis = server.config();
  auto& k = rc.kinds["chat"];
  k.stall_window = 1s;
  k.max_attempts = 1000;
  k.attempt_timeout = 1s;
  k.backoff = {50ms, 100ms, 0.0};
  k.poll_interval = 100ms;
  k.rate_limit_spends_retry = false;
  runtime node_a{sys, rc};
  runtime node_b{sys, rc};
  sim_config healthy;
  healthy.phases[0].latency_min = healthy.phases[0].latency_max = 5ms;
  sim_config saturated = healthy; // always 429
  saturated.phases[0].rate_limit_rate = 1.0;
  node_a.add_simulated_source("ok", healthy);
  node_b.add_simulated_source("busy", saturated);
  // Same scope on both nodes: their progress is judged together.
  node_a.add_route({"/a", "chat", {"ok"}, {}, "shared"});
  node_b.add_route({"/b", "chat", {"busy"}, {}, "shared"});
  std::optional<call_result> verdict;
  std::mutex mx;
  auto t0 = clock_type::now();
  node_b.call(call_request{"/b", "{}"}, [&](call_result r) {
    std::lock_guard<std::mutex> guard{mx};
    verdict = std::move(r);
  });
  auto done = [&] {
    std::lock_guard<std::mutex> guard{mx};
    return verdict.has_value();
  };
  // While node A keeps succeeding, B's saturated call is not stalled, long
  // past its 1 s window.
  while (clock_type::now() - t0 < 2500ms) {
    REQUIRE(node_a.call(call_request{"/a", "{}"}).get().ok());
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(done());
  // Once A stops, the scope's marker ages past the window: B stalls.
  auto quiet = clock_type::now();
  REQUIRE(eventually(done, 5000ms));
  std::lock_guard<std::mutex> guard{mx};
  CHECK(verdict->status == call_status::all_sources_exhausted);
  CHECK(verdict->reason == "stalled");
  // Not before the marker aged a window (A's last success was at most
  // ~0.1 s before it went quiet).
  CHECK(clock_type::now() - quiet >= 800ms);
}
