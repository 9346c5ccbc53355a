// sluice-node end to end, the shared part: the node's config over the test
// upstream, and the fixture that builds the node from it.

#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/tls_upstream.hpp"
#include "loopback_http.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_upstream.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using sluice::testing::test_upstream;
using namespace sluice::testing::loopback;

namespace node_test_support {

// -- the node under test
// --------------------------------------------------------

// The whole node, as a user would write it; `@` stands for the test
// upstream's address. Each source's base_url picks the upstream's behaviour.
inline const char* node_config_template = R"toml(
seed = 7

[node]
max_body_bytes = 65536
shutdown_grace_s = 1

[admission]
session_cap = 2
wait_timeout_s = 0.2

[kinds.chat]
max_attempts = 3
stall_window_s = 5
timeout_s = 10
backoff_base_s = 0.05
backoff_cap_s = 0.2
backoff_jitter = 0.5
poll_interval_s = 0.1

[kinds.oneshot]               # one attempt per call: each call is one outcome
max_attempts = 1
stall_window_s = 5
timeout_s = 10
backoff_base_s = 0.05
backoff_cap_s = 0.2
poll_interval_s = 0.1

[kinds.hedged]                # a second attempt beside one slower than 0.3 s
max_attempts = 3
stall_window_s = 5
timeout_s = 10
backoff_base_s = 0.05
backoff_cap_s = 0.2
poll_interval_s = 0.1
hedge_after_s = 0.3
max_hedged = 1

[sources.ok-src]
type = "http"
base_url = "@/ok"

[sources.busy1-src]
type = "http"
base_url = "@/busy1"

[sources.down-src]
type = "http"
base_url = "@/down"

[sources.teapot-src]         # 418 retried elsewhere
type = "http"
base_url = "@/teapot"
  [sources.teapot-src.statuses]
  transient = [418]

[sources.down-final]          # 503 means "never works": not retried
type = "http"
base_url = "@/down"
  [sources.down-final.statuses]
  permanent = [503]

[sources.empty-src]           # an empty 200 is a failure
type = "http"
base_url = "@/empty"
  [sources.empty-src.statuses]
  empty_2xx_transient = true

[sources.empty-ok]            # an empty 200 is a success (the default)
type = "http"
base_url = "@/empty"

[sources.ej-a]                # two sources under an ejection limit
type = "http"
base_url = "@/ok"
  [sources.ej-a.breaker]
  window_size = 2
  min_samples = 2
  failure_rate_threshold = 0.5
  open_duration_s = 120

[sources.ej-b]
type = "http"
base_url = "@/ok"
  [sources.ej-b.breaker]
  window_size = 2
  min_samples = 2
  failure_rate_threshold = 0.5
  open_duration_s = 120

[sources.flaky]
type = "http"
base_url = "@/ok"
  [sources.flaky.breaker]
  window_size = 4
  min_samples = 4
  failure_rate_threshold = 0.5
  open_duration_s = 1

[sources.slow-src]
type = "http"
base_url = "@/slow"

[sources.stream-src]
type = "http"
base_url = "@/stream"

[routes."/v1/chat/completions"]
sources = ["ok-src"]

[routes."/v1/retry"]
sources = ["busy1-src"]

[routes."/v1/failover"]
sources = ["down-src", "ok-src"]

[routes."/v1/teapot"]
sources = ["teapot-src", "ok-src"]

[routes."/v1/down-final"]
sources = ["down-final", "ok-src"]

[routes."/v1/empty"]
sources = ["empty-src", "ok-src"]

[routes."/v1/empty-ok"]
sources = ["empty-ok", "ok-src"]

[routes."/v1/ejection"]
kind = "oneshot"
sources = ["ej-a", "ej-b"]
max_ejection_percent = 50

[routes."/v1/breaker"]
kind = "oneshot"
sources = ["flaky"]

[routes."/v1/hedge"]
kind = "hedged"
sources = ["slow-src", "ok-src"]

[routes."/v1/slow"]
sources = ["slow-src"]

[routes."/v1/stream"]
sources = ["stream-src"]
)toml";

inline std::string node_config(const test_upstream& upstream) {
  std::string text = node_config_template;
  auto url = upstream.url();
  for (auto at = text.find('@'); at != std::string::npos;
       at = text.find('@', at + url.size()))
    text.replace(at, 1, url);
  return text;
}

// -- clients
// --------------------------------------------------------------------

// -- the fixture
// -------------------------------------------------------------------

struct node_fixture {
  // Declared first: destroyed last, after the node's HTTP sources closed
  // their keep-alive connections to it.
  test_upstream upstream;
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<http_front> front;

  node_fixture() {
    add_error_category(caf_cfg);
    use_loop_scheduler(caf_cfg, 2); // as sluice-node: on event loops
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    // What sluice-node does with a config file and `--listen 127.0.0.1:0`.
    auto cfg = parse_config(node_config(upstream), "node_test.toml");
    cfg.node.listen_host = "127.0.0.1";
    cfg.node.listen_port = 0;
    rt = std::make_unique<runtime>(*sys, cfg.runtime);
    install(*rt, cfg);
    front = std::make_unique<http_front>(*rt, cfg.node);
  }

  ~node_fixture() { front->shutdown(1s); }

  uint16_t port() const { return front->port(); }

  reply post(const std::string& route, const std::string& body = "{}",
             const std::string& session = "") {
    return exchange(port(), http::verb::post, route, body, session);
  }

  // GET /status, parsed (a discarded value if it failed).
  json status() {
    auto r = exchange(port(), http::verb::get, "/status");
    if (r.status != 200)
      return json::value_t::discarded;
    return r.doc();
  }

  static const json* source_in(const json& st, const std::string& name) {
    if (!st.is_object() || !st.contains("sources"))
      return nullptr;
    for (auto& s : st["sources"])
      if (s["name"] == name)
        return &s;
    return nullptr;
  }

  std::string breaker_state(const std::string& source) {
    auto st = status();
    auto s = source_in(st, source);
    return s ? (*s)["breaker"]["state"].get<std::string>() : "?";
  }

  // Every admission tier has nothing in use and no source has anything in
  // flight, per /status.
  static bool all_returned(const json& st) {
    if (!st.is_object())
      return false;
    auto& tiers = st["tiers"];
    if (tiers["global"]["in_use"] != 0)
      return false;
    for (auto& t : tiers["sessions"])
      if (t["in_use"] != 0)
        return false;
    for (auto& t : tiers["connections"])
      if (t["in_use"] != 0)
        return false;
    for (auto& s : st["sources"])
      if (s["in_flight"] != 0)
        return false;
    return true;
  }
};

} // namespace node_test_support
