// A sluice-node built from config text the way sluice-node builds itself
// (its own actor system, runtime and HTTP front), with the Redis backend
// and a cluster-wide cap: Redis stops under load, calls fail closed with
// 503 governance_backend_error, none hangs, and service resumes by itself
// when Redis is back. (Several nodes as processes: cluster_process_test.)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "loopback_http.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/redis/lease_pool.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_redis.hpp"
#include "test_upstream.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_redis;
using sluice::testing::test_upstream;
using namespace sluice::testing::loopback;
using json = nlohmann::json;

namespace {

std::string cluster_config(const test_upstream& upstream, uint16_t redis_port) {
  return R"toml(
[admission]
wait_timeout_s = 2
[backend]
type = "redis"
address = "127.0.0.1:)toml" +
         std::to_string(redis_port) + R"toml("
key_prefix = "cluster-test:"
cluster_global_cap = 2
lease_ttl_s = 2
[sources.slow]
type = "http"
base_url = ")toml" +
         upstream.url("/stream") + R"toml("
[routes."/v1/chat/completions"]
sources = ["slow"]
)toml";
}

struct node {
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<http_front> front;

  explicit node(const std::string& text) {
    add_error_category(caf_cfg);
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    auto cfg = parse_config(text, "cluster_node_test.toml");
    cfg.node.listen_host = "127.0.0.1";
    cfg.node.listen_port = 0;
    rt = std::make_unique<runtime>(*sys, cfg.runtime);
    install(*rt, cfg);
    front = std::make_unique<http_front>(*rt, cfg.node);
  }

  ~node() {
    front->shutdown(1s);
    front.reset();
    rt.reset();
  }

  // This node's cluster leases, per /status (-1 if unreadable).
  int held() {
    auto r = exchange(front->port(), http::verb::get, "/status");
    auto doc = r.doc();
    if (r.status != 200 || !doc.is_object())
      return -1;
    return doc["tiers"]["cluster"]["held_here"].get<int>();
  }
};

} // namespace

TEST_CASE("node: Redis stopped under load - calls fail closed, none hangs, "
          "and service resumes when Redis is back",
          "[node][redis]") {
  test_upstream upstream;
  test_redis redis;
  auto text = cluster_config(upstream, redis.port());
  node n{text};
  auto call = [&] {
    auto t0 = std::chrono::steady_clock::now();
    auto r = exchange(n.front->port(), http::verb::post, "/v1/chat/completions",
                      "{}");
    return std::make_pair(r, std::chrono::steady_clock::now() - t0);
  };
  REQUIRE(call().first.status == 200);
  redis.stop();
  // Every call during the outage gets its answer, promptly, and it is the
  // fail-closed one: nothing passes unchecked.
  for (int i = 0; i < 5; ++i) {
    auto [r, took] = call();
    CHECK(r.status == 503);
    CHECK(r.body.find("governance_backend_error") != std::string::npos);
    CHECK(took < 3s); // the connect and command timeouts, not a hang
  }
  redis.start();
  // No manual step: the node reconnects on its own.
  auto until = std::chrono::steady_clock::now() + 10s;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    status = call().first.status;
    if (status == 200)
      break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(status == 200);
  CHECK(n.held() == 0);
}
