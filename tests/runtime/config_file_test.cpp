// The config file: strict TOML with errors that name the key and the line.

#include "sluice/runtime/config_file.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "fakes/tls_upstream.hpp"
#include "log_capture.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/config_error.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;

namespace {

const char* minimal = R"toml(
[sources.a]
type = "simulated"

[routes."/v1/chat/completions"]
sources = ["a"]
)toml";

// The config_error for `text`, or nullopt if it parses.
std::optional<config_error> refusal(const std::string& text) {
  try {
    parse_config(text);
  } catch (const config_error& e) {
    return e;
  }
  return std::nullopt;
}

} // namespace

TEST_CASE("the default config is valid and complete") {
  auto cfg = parse_config(default_config_text());
  CHECK(cfg.node.listen_host == "127.0.0.1");
  CHECK(cfg.node.listen_port == 8080);
  CHECK(cfg.runtime.admission.global_cap == 1024);
  CHECK(cfg.runtime.kinds.at("chat").rate_limit_spends_retry == false);
  CHECK(cfg.runtime.kinds.at("embeddings").rate_limit_spends_retry == true);
  REQUIRE(cfg.sources.size() == 2);
  REQUIRE(cfg.routes.size() == 2);
  CHECK(cfg.routes[0].route.name == "/v1/chat/completions");
  CHECK(cfg.routes[0].route.sources ==
        std::vector<std::string>{"sim-primary", "sim-backup"});
  CHECK_FALSE(cfg.runtime.redis.has_value()); // progress kept in process
}

TEST_CASE("the default config runs the node as node_settings' defaults do") {
  // The default config said scheduler = "sharing" after "loops" became the
  // default: the Quick start's node ran the design issue 14 replaced.
  auto cfg = parse_config(default_config_text());
  node_settings defaults;
  CHECK(cfg.node.scheduler == defaults.scheduler);
  CHECK(cfg.node.scheduler == "loops");
  CHECK(cfg.node.loops == defaults.loops);
  CHECK(cfg.node.max_connections == defaults.max_connections);
  CHECK(cfg.node.max_body_bytes == defaults.max_body_bytes);
}

TEST_CASE("the default config's call kinds are the library's default kinds") {
  // One source of truth: the node on its default config and a library user
  // who names no kinds run the same policies (chat's timeout was 120 s in
  // the default config, 300 s in runtime_config::default_kinds).
  auto cfg = parse_config(default_config_text());
  auto want = runtime_config::default_kinds();
  REQUIRE(cfg.runtime.kinds.size() == want.size());
  for (const auto& [name, w] : want) {
    INFO(name);
    REQUIRE(cfg.runtime.kinds.count(name) == 1);
    const auto& got = cfg.runtime.kinds.at(name);
    CHECK(got.max_attempts == w.max_attempts);
    CHECK(got.stall_window == w.stall_window);
    CHECK(got.attempt_timeout == w.attempt_timeout);
    CHECK(got.ttft_timeout == w.ttft_timeout);
    CHECK(got.backoff.base == w.backoff.base);
    CHECK(got.backoff.cap == w.backoff.cap);
    CHECK(got.backoff.jitter == w.backoff.jitter);
    CHECK(got.poll_interval == w.poll_interval);
    CHECK(got.rate_limit_spends_retry == w.rate_limit_spends_retry);
    CHECK(got.max_retry_after == w.max_retry_after);
    CHECK(got.hedge_after == w.hedge_after);
    CHECK(got.max_hedged == w.max_hedged);
  }
  CHECK(cfg.runtime.kinds.at("chat").attempt_timeout == 300s);
  CHECK(cfg.runtime.kinds.at("embeddings").attempt_timeout == 60s);
}

TEST_CASE("a redis backend is read with its address, secret and timeouts") {
  setenv("SLUICE_TEST_REDIS_PASSWORD", "hunter2", 1);
  auto cfg = parse_config(std::string{minimal} + R"toml(
[backend]
type = "redis"
address = "10.0.0.7:6380"
password_env = "SLUICE_TEST_REDIS_PASSWORD"
key_prefix = "prod:"
connect_timeout_ms = 250
command_timeout_ms = 100
reconnect_after_ms = 1000
progress_ttl_s = 7200
cluster_global_cap = 64
lease_ttl_s = 5
)toml");
  REQUIRE(cfg.runtime.redis.has_value());
  auto& r = *cfg.runtime.redis;
  CHECK(r.host == "10.0.0.7");
  CHECK(r.port == 6380);
  CHECK(r.password == "hunter2");
  CHECK(r.key_prefix == "prod:");
  CHECK(r.connect_timeout == std::chrono::milliseconds{250});
  CHECK(r.command_timeout == std::chrono::milliseconds{100});
  CHECK(r.reconnect_after == std::chrono::seconds{1});
  CHECK(cfg.runtime.progress_ttl == std::chrono::hours{2});
  CHECK(cfg.runtime.cluster_global_cap == 64);
  CHECK(cfg.runtime.lease_ttl == std::chrono::seconds{5});
}

TEST_CASE("values are read into the structs they configure") {
  auto cfg = parse_config(R"toml(
seed = 9
[node]
listen = "0.0.0.0:9090"
max_body_bytes = 2048
shutdown_grace_s = 2.5
scheduler = "stealing"
actor_threads = 3
accept = "handoff"
[admission]
session_cap = 4
wait_timeout_s = 0.25
[kinds.chat]
max_attempts = 5
stall_window_s = 60
timeout_s = 20
ttft_timeout_s = 5
[sources.a]
type = "simulated"
seed = 3
  [sources.a.breaker]
  window = "time"
  window_span_s = 20
  open_duration_s = 7
    [sources.a.breaker.outcomes]
    rate_limited = "failure"
  [sources.a.aimd]
  initial = 8
  slow_start = false
  [sources.a.quota]
  rate_per_s = 2.5
  burst = 5
  [[sources.a.phases]]
  length_s = 10
  latency_min_ms = 5
  latency_max_ms = 15
  transient_rate = 0.5
  retry_after_s = 2
  [[sources.a.phases]]
  hang_rate = 0.1
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["a"]
weights = [2]
scope = "shared"
)toml");
  CHECK(cfg.runtime.seed == 9);
  CHECK(cfg.node.listen_host == "0.0.0.0");
  CHECK(cfg.node.listen_port == 9090);
  CHECK(cfg.node.max_body_bytes == 2048);
  CHECK(cfg.node.scheduler == "stealing");
  CHECK(cfg.node.actor_threads == 3);
  CHECK(cfg.node.accept == "handoff");
  CHECK(cfg.node.shutdown_grace == 2500ms);
  CHECK(cfg.runtime.admission.session_cap == 4);
  CHECK(cfg.runtime.admission.wait_timeout == 250ms);
  auto& chat = cfg.runtime.kinds.at("chat");
  CHECK(chat.max_attempts == 5);
  CHECK(chat.attempt_timeout == 20s);
  CHECK(chat.ttft_timeout == 5s);
  auto& a = cfg.sources.at(0);
  CHECK(a.sim.seed == 3);
  CHECK(a.settings.breaker.window == policy::breaker_config::window_kind::time);
  CHECK(a.settings.breaker.open_duration == 7s);
  CHECK(a.settings.breaker.classes.rate_limited ==
        policy::outcome_class::failure);
  CHECK(a.settings.aimd.initial == 8);
  CHECK_FALSE(a.settings.aimd.slow_start);
  REQUIRE(a.settings.quota);
  CHECK(a.settings.quota->rate_per_s == 2.5);
  REQUIRE(a.sim.phases.size() == 2);
  CHECK(a.sim.phases[0].length == 10s);
  CHECK(a.sim.phases[0].latency_max == 15ms);
  CHECK(a.sim.phases[0].retry_after == 2s);
  CHECK(a.sim.phases[1].hang_rate == 0.1);
  CHECK(cfg.routes.at(0).route.scope == "shared");
  CHECK(cfg.routes.at(0).route.weights == std::vector<double>{2});
}

TEST_CASE("an unknown key is refused with its key and line") {
  auto e = refusal(std::string{minimal} + "[admission]\nsesion_cap = 4\n");
  REQUIRE(e);
  CHECK(e->key() == "admission.sesion_cap");
  CHECK(e->problem() == "unknown key");
  CHECK(e->line() == 8);
  e = refusal("colour = \"blue\"\n" + std::string{minimal});
  REQUIRE(e);
  CHECK(e->key() == "colour");
  CHECK(e->line() == 1);
  // After a table header, a key belongs to that table.
  e = refusal(std::string{minimal} + "colour = \"blue\"\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".colour");
}

TEST_CASE("a value of the wrong type is refused") {
  auto e =
      refusal(std::string{minimal} + "[admission]\nglobal_cap = \"many\"\n");
  REQUIRE(e);
  CHECK(e->key() == "admission.global_cap");
  CHECK(e->problem() == "must be an integer");
  CHECK(e->line() == 8);
}

TEST_CASE("nonsense values are refused, naming the key as written") {
  struct bad {
    std::string text;
    std::string key;
  };
  std::vector<bad> cases{
      {"[admission]\nglobal_cap = 0\n", "admission.global_cap"},
      {"[admission]\nwait_timeout_s = -1\n", "admission.wait_timeout_s"},
      {"[kinds.chat]\nmax_attempts = 0\n", "kinds.chat.max_attempts"},
      {"[kinds.chat]\ntimeout_s = 0\n", "kinds.chat.timeout_s"},
      {"[kinds.chat]\nbackoff_jitter = 3\n", "kinds.chat.backoff_jitter"},
      {"[sources.a.breaker]\nfailure_rate_threshold = 2\n",
       "sources.a.breaker.failure_rate_threshold"},
      {"[sources.a.breaker]\nopen_duration_s = -3\n",
       "sources.a.breaker.open_duration_s"},
      {"[sources.a.aimd]\ndecrease_ratio = 1.5\n",
       "sources.a.aimd.decrease_ratio"},
      {"[sources.a.quota]\nrate_per_s = 0\n", "sources.a.quota.rate_per_s"},
      {"[[sources.a.phases]]\nhang_rate = 2\n",
       "sources.a.phases[0].hang_rate"},
      {"[node]\nlisten = \"localhost:99999\"\n", "node.listen"},
      {"[node]\nlisten = \"8080\"\n", "node.listen"},
      {"[node]\nscheduler = \"fast\"\n", "node.scheduler"},
      {"[node]\naccept = \"round_robin\"\n", "node.accept"},
      {"[node]\nactor_threads = -1\n", "node.actor_threads"},
      {"[backend]\ntype = \"etcd\"\n", "backend.type"},
      {"[backend]\ntype = \"redis\"\naddress = \"redis:\"\n",
       "backend.address"},
      {"[backend]\ntype = \"redis\"\naddress = \"redis:0\"\n",
       "backend.address"},
      {"[backend]\ntype = \"redis\"\naddress = \"::1:6379\"\n",
       "backend.address"},
      // Upper bounds: every number has one.
      {"[sources.a.breaker]\nwindow = \"time\"\nwindow_buckets = "
       "2000000000\n",
       "sources.a.breaker.window_buckets"},
      {"[sources.a.breaker]\nwindow_size = 10001\n",
       "sources.a.breaker.window_size"},
      {"[sources.a.breaker]\nmin_samples = 20000\n",
       "sources.a.breaker.min_samples"},
      {"[sources.a.breaker]\nhalf_open_probes = 20000\n",
       "sources.a.breaker.half_open_probes"},
      {"[sources.a.breaker]\nopen_duration_max_s = 999999999\n",
       "sources.a.breaker.open_duration_max_s"},
      {"[sources.a.breaker]\nopen_duration_growth = 1e300\n",
       "sources.a.breaker.open_duration_growth"},
      {"[kinds.chat]\nstall_window_s = 1e8\n", "kinds.chat.stall_window_s"},
      {"[kinds.chat]\nmax_attempts = 5000\n", "kinds.chat.max_attempts"},
      {"[kinds.chat]\nmax_retry_after_s = 0\n", "kinds.chat.max_retry_after_s"},
      {"[kinds.chat]\nmax_retry_after_s = 86401\n",
       "kinds.chat.max_retry_after_s"},
      {"[kinds.chat]\nmax_retry_after_s = -1\n",
       "kinds.chat.max_retry_after_s"},
      {"[admission]\nglobal_cap = 9999999999\n", "admission.global_cap"},
      {"[node]\nmax_body_bytes = 1073741825\n", "node.max_body_bytes"},
      {"[node]\nshutdown_grace_s = 1e7\n", "node.shutdown_grace_s"},
      {"[sources.a.quota]\nrate_per_s = 1e12\n", "sources.a.quota.rate_per_s"},
      {"[sources.a.aimd]\nmax = 3000000000\n", "sources.a.aimd.max"},
      {"[[sources.a.phases]]\nlatency_min_ms = 1e12\n",
       "sources.a.phases[0].latency_min_ms"},
      {"[backend]\nprogress_ttl_s = 1e9\n", "backend.progress_ttl_s"},
      // Strict host:port (no atoi: '80x' is not port 80).
      {"[node]\nlisten = \"127.0.0.1:80x\"\n", "node.listen"},
      {"[node]\nlisten = \":8080\"\n", "node.listen"},
      {"[node]\nlisten = \"[::1\"\n", "node.listen"},
      {"[node]\nlisten = \"[::1]8080\"\n", "node.listen"},
      {"[node]\nlisten = \"[]:8080\"\n", "node.listen"},
      {"[node]\nlisten = \"::1:8080\"\n", "node.listen"},
      {"[node]\nlisten = \"bad host:8080\"\n", "node.listen"},
      {"[node]\nlisten = \"127.0.0.1:+80\"\n", "node.listen"},
      {"[backend]\npassword_env = \"SLUICE_SURELY_UNSET_VARIABLE\"\n",
       "backend.password_env"},
      {"[backend]\ncommand_timeout_ms = 0\n", "backend.command_timeout_ms"},
      {"[backend]\nprogress_ttl_s = 0.5\n", "backend.progress_ttl_s"},
      {"[backend]\ncluster_global_cap = 8\n", "backend.cluster_global_cap"},
      {"[backend]\ntype = \"redis\"\nlease_ttl_s = 0\n", "backend.lease_ttl_s"},
  };
  for (auto& c : cases) {
    INFO(c.text);
    auto e = refusal(std::string{minimal} + c.text);
    REQUIRE(e);
    CHECK(e->key() == c.key);
    CHECK(e->line() > 0);
  }
}

TEST_CASE("routes must name known sources and kinds") {
  auto e = refusal(R"toml(
[sources.a]
type = "simulated"
[routes."/v1/chat/completions"]
sources = ["a", "b"]
)toml");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".sources");
  CHECK(e->problem() == "unknown source 'b'");
  CHECK(e->line() == 5);
  e = refusal(R"toml(
[sources.a]
type = "simulated"
[routes."/v1/chat/completions"]
kind = "poetry"
sources = ["a"]
)toml");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".kind");
  e = refusal("[sources.a]\ntype = \"simulated\"\n");
  REQUIRE(e);
  CHECK(e->key() == "routes");
}

TEST_CASE("unsupported source types and syntax errors are refused") {
  auto e = refusal(R"toml(
[sources.a]
type = "carrier-pigeon"
[routes."/v1/chat/completions"]
sources = ["a"]
)toml");
  REQUIRE(e);
  CHECK(e->key() == "sources.a.type");
  e = refusal("[admission\nglobal_cap = 3\n");
  REQUIRE(e);
  CHECK(e->line() == 1);
}

TEST_CASE_METHOD(sluice::testing::virtual_time_fixture,
                 "the default config installs into a runtime that answers "
                 "calls") {
  auto cfg = parse_config(default_config_text());
  runtime rt{sys, cfg.runtime};
  install(rt, cfg);
  std::optional<call_result> result;
  rt.call(call_request{"/v1/chat/completions", "{}"},
          [&](call_result r) { result = std::move(r); });
  run();
  advance(1s);
  REQUIRE(result);
  CHECK(result->ok());
}

TEST_CASE("http sources are read with their URL, headers and timeouts") {
  setenv("SLUICE_CONFIG_TEST_KEY", "Bearer abc", 1);
  auto cfg = parse_config(R"toml(
[sources.openai]
type = "http"
base_url = "http://127.0.0.1:9000/proxy"
connect_timeout_s = 2
response_timeout_s = 60
max_idle_connections = 4
max_body_bytes = 1000000
max_error_body_bytes = 4096
  [sources.openai.headers]
  Authorization = "env:SLUICE_CONFIG_TEST_KEY"
  [sources.openai.breaker]
  min_samples = 5
[routes."/v1/chat/completions"]
sources = ["openai"]
)toml");
  auto& s = cfg.sources.at(0);
  CHECK(s.type == "http");
  CHECK(s.http.base_url == "http://127.0.0.1:9000/proxy");
  CHECK(s.http.connect_timeout == 2s);
  CHECK(s.http.response_timeout == 60s);
  CHECK(s.http.max_idle_connections == 4);
  CHECK(s.http.max_body_bytes == 1000000);
  CHECK(s.http.max_error_body_bytes == 4096);
  REQUIRE(s.http.headers.size() == 1);
  CHECK(s.http.headers[0].second == "env:SLUICE_CONFIG_TEST_KEY");
  CHECK(s.settings.breaker.min_samples == 5);
  auto e = refusal(R"toml(
[sources.openai]
type = "http"
base_url = "ftp://nope"
[routes."/v1/chat/completions"]
sources = ["openai"]
)toml");
  REQUIRE(e);
  CHECK(e->key() == "sources.openai.base_url");
  e = refusal(R"toml(
[sources.openai]
type = "http"
base_url = "http://127.0.0.1:9000"
  [sources.openai.headers]
  Authorization = "env:SLUICE_SURELY_UNSET_VARIABLE"
[routes."/v1/chat/completions"]
sources = ["openai"]
)toml");
  REQUIRE(e);
  CHECK(e->key() == "sources.openai.headers.Authorization");
}

TEST_CASE("parse_host_port: host names, IPv4, bracketed IPv6, strict ports") {
  auto hp = parse_host_port("localhost:8080");
  CHECK(hp.host == "localhost");
  CHECK(hp.port == 8080);
  hp = parse_host_port("[::1]:9000");
  CHECK(hp.host == "::1"); // no brackets: ready for a resolver
  CHECK(hp.port == 9000);
  hp = parse_host_port("[2001:db8::7]:0");
  CHECK(hp.host == "2001:db8::7");
  CHECK(hp.port == 0);
  hp = parse_host_port("10.0.0.7:65535");
  CHECK(hp.host == "10.0.0.7");
  CHECK(hp.port == 65535);
  hp = parse_host_port("redis-1.internal_x", {6379});
  CHECK(hp.host == "redis-1.internal_x");
  CHECK(hp.port == 6379);
  hp = parse_host_port("[::1]", {6379});
  CHECK(hp.host == "::1");
  CHECK(hp.port == 6379);
  for (auto bad : {"",        ":80",        "host:",          "host:80x",
                   "host:-1", "host:65536", "host:000080000", "host: 80",
                   "[::1",    "[::1]x",     "[]:80",          "[host]:80",
                   "::1:80",  "a..b:80",    "-a:80",          "a-:80",
                   "a b:80",  "host",       "[::1]",          "host:80:90",
                   "[::1]:"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_host_port(bad), std::invalid_argument);
  }
  CHECK_THROWS_AS(parse_host_port(std::string(300, 'a') + ":80"),
                  std::invalid_argument);
}

TEST_CASE("parse_host_port: the cases every caller shares") {
  using Catch::Contains;
  auto why = [](std::string_view text, host_port_rules rules = {}) {
    try {
      parse_host_port(text, rules);
    } catch (const std::invalid_argument& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  // [::1]:80 is the loopback address and port 80.
  auto hp = parse_host_port("[::1]:80");
  CHECK(hp.host == "::1");
  CHECK(hp.port == 80);
  CHECK(to_string(hp) == "[::1]:80"); // read back as written
  CHECK(to_string(parse_host_port("localhost:8080")) == "localhost:8080");
  // [::1] without a port: only where the caller has a default.
  CHECK_THAT(why("[::1]"), Contains("needs a port"));
  CHECK(parse_host_port("[::1]", {443, 1}).port == 443);
  // ::1:80 is refused: host ::1 port 80, or host ::1:80 without a port?
  CHECK_THAT(why("::1:80"), Contains("brackets"));
  CHECK_THAT(why("::1:80", {80, 1}), Contains("brackets"));
  // Port 0 is "any free port" for a listener, nothing to connect to.
  CHECK(parse_host_port("127.0.0.1:0").port == 0);
  CHECK_THAT(why("127.0.0.1:0", {std::nullopt, 1}), Contains("1..65535"));
  CHECK_THAT(why("[::1]:0", {6379, 1}), Contains("1..65535"));
  CHECK_THAT(why("127.0.0.1:65536"), Contains("0..65535"));
  CHECK_THAT(why("[::1]:65536"), Contains("0..65535"));
  // An empty host, bare or bracketed, with or without a port.
  CHECK_THAT(why(":80"), Contains("host is empty"));
  CHECK_THAT(why("", {80, 1}), Contains("host is empty"));
  CHECK_THAT(why("[]:80"), Contains("empty"));
  // Brackets hold a real IPv6 address, not merely hex digits and colons.
  CHECK_THAT(why("[1:2:3]:80"), Contains("not an IPv6 address"));
  CHECK_THAT(why("[::1::]:80"), Contains("not an IPv6 address"));
  CHECK(parse_host_port("[::ffff:10.0.0.1]:80").host == "::ffff:10.0.0.1");
}

TEST_CASE("every HOST:PORT key refuses junk with a message naming the key") {
  auto refused = [](const std::string& text) -> std::string {
    try {
      parse_config(std::string{minimal} + text);
    } catch (const config_error& e) {
      return e.key() + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused("[node]\nlisten = \"::1:80\"\n"),
             StartsWith("node.listen") && Contains("brackets"));
  CHECK_THAT(refused("[node]\nadmin_listen = \"[::1]\"\n"),
             StartsWith("node.admin_listen") && Contains("needs a port"));
  CHECK_THAT(refused("[backend]\naddress = \"[::1]:0\"\n"),
             StartsWith("backend.address") && Contains("1..65535"));
  CHECK_THAT(refused("[node]\nlisten = \":8080\"\n"),
             StartsWith("node.listen") && Contains("host is empty"));
  // And the good ones pass.
  CHECK(refused("[node]\nlisten = \"[::1]:0\"\n"
                "admin_listen = \"[::1]:9090\"\n"
                "[backend]\ntype = \"redis\"\naddress = \"[::1]\"\n")
            .empty());
}

TEST_CASE("listen takes host names and bracketed IPv6, stored unbracketed") {
  auto cfg =
      parse_config(std::string{minimal} + "[node]\nlisten = \"localhost:0\"\n");
  CHECK(cfg.node.listen_host == "localhost");
  CHECK(cfg.node.listen_port == 0);
  cfg =
      parse_config(std::string{minimal} + "[node]\nlisten = \"[::1]:8081\"\n");
  CHECK(cfg.node.listen_host == "::1");
  CHECK(cfg.node.listen_port == 8081);
  cfg = parse_config(std::string{minimal} + "[backend]\ntype = \"redis\"\n"
                                            "address = \"[::1]:6380\"\n");
  CHECK(cfg.runtime.redis->host == "::1");
  CHECK(cfg.runtime.redis->port == 6380);
  cfg = parse_config(std::string{minimal} +
                     "[backend]\ntype = \"redis\"\naddress = \"redis\"\n");
  CHECK(cfg.runtime.redis->host == "redis");
  CHECK(cfg.runtime.redis->port == 6379);
}

TEST_CASE("max_retry_after_s is read per kind, 60 s by default") {
  auto cfg = parse_config(std::string{minimal} +
                          "[kinds.chat]\nmax_retry_after_s = 120\n");
  CHECK(cfg.runtime.kinds.at("chat").max_retry_after == 120s);
  CHECK(cfg.runtime.kinds.at("embeddings").max_retry_after == 60s);
  auto e = refusal(std::string{minimal} +
                   "[kinds.chat]\nmax_retry_after_s = 86401\n");
  REQUIRE(e);
  CHECK(e->line() == 8);
  CHECK(std::string{e->what()}.find("kinds.chat.max_retry_after_s") !=
        std::string::npos);
}

TEST_CASE("hedging is read per kind, off by default, and bad settings "
          "refused naming the key") {
  auto cfg = parse_config(std::string{minimal} +
                          "[kinds.chat]\nhedge_after_s = 1.5\nmax_hedged = 2\n");
  CHECK(cfg.runtime.kinds.at("chat").hedge_after == 1500ms);
  CHECK(cfg.runtime.kinds.at("chat").max_hedged == 2);
  CHECK_FALSE(cfg.runtime.kinds.at("embeddings").hedge_after);
  auto e = refusal(std::string{minimal} + "[kinds.chat]\nmax_hedged = 11\n");
  REQUIRE(e);
  CHECK(e->key() == "kinds.chat.max_hedged");
  CHECK(e->line() == 8);
  e = refusal(std::string{minimal} + "[kinds.chat]\nhedge_after_s = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "kinds.chat.hedge_after_s");
}

TEST_CASE("model tables are read, and bad ones refused with key and line") {
  auto cfg = parse_config(R"toml(
[sources.a]
type = "simulated"
  [sources.a.models]
  "gpt-4o" = "gpt-4o-2024-08-06"
[sources.b]
type = "simulated"
[routes."/v1/chat/completions"]
  [routes."/v1/chat/completions".models]
  "gpt-4o" = ["a"]
  "gpt-4o*" = { sources = ["a", "b"], weights = [3, 1] }
)toml");
  CHECK(cfg.sources[0].settings.model_names.at("gpt-4o") ==
        "gpt-4o-2024-08-06");
  auto& r = cfg.routes[0].route;
  CHECK(r.sources.empty()); // no default: by model only
  REQUIRE(r.models.size() == 2);
  CHECK(r.models[0].pattern == "gpt-4o");
  CHECK(r.models[1].sources == std::vector<std::string>{"a", "b"});
  CHECK(r.models[1].weights == std::vector<double>{3, 1});
  auto head = std::string{"[sources.a]\ntype = \"simulated\"\n"};
  // An unknown source in a model entry: its key and line.
  auto e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                          "  \"m\" = [\"zz\"]\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.m");
  CHECK(e->line() == 5);
  // A control character in a pattern, a bad value, weights without match.
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\\u0001\" = [\"a\"]\n");
  REQUIRE(e);
  CHECK(e->problem().find("control") != std::string::npos);
  CHECK(e->line() == 5);
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\" = 5\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.m");
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\" = { sources = [\"a\"], weights = [1, 2] }\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.\"m\".weights");
  // Neither sources nor models.
  e = refusal(head + "[routes.\"/r\"]\nkind = \"chat\"\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".sources");
  // A source's renames: names must be 1-256 bytes, printable.
  e = refusal("[sources.a]\ntype = \"simulated\"\n  [sources.a.models]\n"
              "  \"\" = \"x\"\n[routes.\"/r\"]\nsources = [\"a\"]\n");
  REQUIRE(e);
  CHECK(e->key().rfind("sources.a.models", 0) == 0);
  CHECK(e->line() == 4);
  // The node's own endpoints are no routes.
  for (auto own : {"/v1/models", "/v1/models/x", "/status", "/healthz"}) {
    INFO(own);
    e = refusal(head + "[routes.\"" + own + "\"]\nsources = [\"a\"]\n");
    REQUIRE(e);
    CHECK(e->problem().find("own endpoint") != std::string::npos);
  }
}

namespace {

// An https:// source `openai` with `tls_lines` in its [tls] table (line 5
// on), behind the chat route.
std::string https_source(const std::string& tls_lines,
                         const std::string& url = "https://127.0.0.1:8443") {
  return "\n[sources.openai]\ntype = \"http\"\nbase_url = \"" + url +
         "\"\n  [sources.openai.tls]\n" + tls_lines +
         "[routes.\"/v1/chat/completions\"]\nsources = [\"openai\"]\n";
}

std::string quoted(const std::string& path) {
  return "\"" + path + "\"";
}

} // namespace

TEST_CASE("the tls table of an https source is read and its files checked",
          "[tls]") {
  auto& pki = sluice::testing::test_pki::get();
  auto cfg = parse_config(https_source(
      "  ca_file = " + quoted(pki.file("ca.pem")) + "\n" +
      "  client_cert = " + quoted(pki.file("client.pem")) + "\n" +
      "  client_key = " + quoted(pki.file("client.key")) + "\n" +
      "  server_name = \"api.internal\"\n"));
  auto& s = cfg.sources.at(0);
  REQUIRE(s.http.tls);
  CHECK(s.http.tls->ca_file == pki.file("ca.pem"));
  CHECK(s.http.tls->client_cert == pki.file("client.pem"));
  CHECK(s.http.tls->client_key == pki.file("client.key"));
  CHECK(s.http.tls->server_name == "api.internal");
  CHECK(s.http.tls->verify);
  // No table: the defaults (verified against the system store).
  auto plain = parse_config(R"toml(
[sources.openai]
type = "http"
base_url = "https://api.openai.com/v1"
[routes."/v1/chat/completions"]
sources = ["openai"]
)toml");
  CHECK_FALSE(plain.sources.at(0).http.tls);
}

TEST_CASE("bad tls settings are refused with their key and line", "[tls]") {
  auto& pki = sluice::testing::test_pki::get();
  auto refused = [](const std::string& text) {
    auto e = refusal(text);
    REQUIRE(e);
    return std::make_pair(e->key(), e->line());
  };
  CHECK(refused(https_source("  ca_file = " +
                             quoted(pki.file("missing.pem")) + "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.ca_file"}, 6));
  CHECK(refused(https_source("  ca_file = " +
                             quoted(pki.file("not_a_cert.pem")) + "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.ca_file"}, 6));
  // A key that is not the certificate's.
  auto mismatch = refusal(https_source(
      "  client_cert = " + quoted(pki.file("client.pem")) + "\n" +
      "  client_key = " + quoted(pki.file("server.key")) + "\n"));
  REQUIRE(mismatch);
  CHECK(mismatch->key() == "sources.openai.tls.client_key");
  CHECK(mismatch->line() == 7);
  CHECK_THAT(mismatch->what(), Catch::Contains("does not match"));
  CHECK(refused(https_source("  client_cert = " +
                             quoted(pki.file("client.pem")) + "\n" +
                             "  client_key = " +
                             quoted(pki.file("unreadable.key")) + "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.client_key"}, 7));
  CHECK(refused(https_source("  verfy = false\n")) ==
        std::make_pair(std::string{"sources.openai.tls.verfy"}, 6));
  CHECK(refused(https_source("  verify = \"no\"\n")) ==
        std::make_pair(std::string{"sources.openai.tls.verify"}, 6));
  // TLS settings on a plain http:// source.
  CHECK(refused(https_source("  verify = false\n",
                             "http://127.0.0.1:8080")) ==
        std::make_pair(std::string{"sources.openai.tls"}, 5));
}

TEST_CASE("a FIFO named as a TLS file is refused at once, naming the key "
          "and line",
          "[tls][files]") {
  // Issue 30, finding 6: its fingerprint and OpenSSL both opened it for a
  // blocking read; nothing writes to a FIFO, so parsing the config hung.
  auto fifo = "/tmp/sluice-tls-fifo-" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  auto e = refusal(https_source("  ca_file = " + quoted(fifo) + "\n"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds{1});
  std::remove(fifo.c_str());
  REQUIRE(e);
  CHECK(e->key() == "sources.openai.tls.ca_file");
  CHECK(e->line() == 6);
  CHECK_THAT(e->what(), Catch::Contains("is not a regular file"));
}

TEST_CASE("tls.verify = false is accepted only as written, with a warning "
          "at start naming the source",
          "[tls]") {
  auto cfg = parse_config(https_source("  verify = false\n"));
  REQUIRE(cfg.sources.at(0).http.tls);
  CHECK_FALSE(cfg.sources.at(0).http.tls->verify);
  sluice::testing::log_capture log;
  caf::actor_system_config caf_cfg;
  caf::actor_system sys{caf_cfg};
  {
    runtime rt{sys, cfg.runtime};
    install(rt, cfg);
    CHECK(log.has("warning", "openai", "tls.verify = false"));
    auto src = rt.find_http_source("openai");
    REQUIRE(src);
    CHECK(src->tls);
    CHECK_FALSE(src->tls_verify);
  }
  sys.await_actors_before_shutdown(false);
}

TEST_CASE("the default config is runtime/config/default_config.toml") {
  std::ifstream in{SLUICE_SOURCE_DIR "/runtime/config/default_config.toml"};
  REQUIRE(in);
  std::stringstream file;
  file << in.rdbuf();
  // The file parses as it is (its kinds line is a comment) ...
  CHECK_NOTHROW(parse_config(file.str()));
  // ... and the embedded text is that file with the library's kinds in place
  // of that line.
  std::string text{default_config_text()};
  CHECK(text.find("{{kinds}}") == std::string::npos);
  CHECK(file.str().find("{{kinds}}") != std::string::npos);
  CHECK(text.find("[kinds.chat]") != std::string::npos);
  auto head = file.str().substr(0, file.str().find("# {{kinds}}"));
  CHECK(text.compare(0, head.size(), head) == 0);
  auto tail = file.str().substr(file.str().find("[sources.sim-primary]"));
  CHECK(text.size() >= tail.size());
  CHECK(text.compare(text.size() - tail.size(), tail.size(), tail) == 0);
}

TEST_CASE("backend settings are checked by the library's rules") {
  // What the library refuses is named with the file's key and line.
  auto e = refusal(std::string{minimal} +
                   "[backend]\nreconnect_after_ms = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.reconnect_after_ms");
  CHECK(e->line() > 0);
  e = refusal(std::string{minimal} +
              "[backend]\ntype = \"redis\"\nconnect_timeout_ms = -1\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.connect_timeout_ms");
  CHECK(e->problem() == "must be positive");
  e = refusal(std::string{minimal} + "[backend]\nlease_ttl_s = 0.05\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.lease_ttl_s");
  CHECK(e->problem() == "must be at least 100 ms");
}

TEST_CASE("an http source's status rules are read, and bad ones refused "
          "naming the key and line") {
  auto cfg = parse_config(R"toml(
[sources.p]
type = "http"
base_url = "http://127.0.0.1:9000"
  [sources.p.statuses]
  transient = [404, 409]
  rate_limited = [529]
  permanent = [503]
  empty_2xx_transient = true
[routes."/v1/chat/completions"]
sources = ["p"]
)toml");
  auto& rules = cfg.sources.at(0).http.statuses;
  using policy::outcome_kind;
  CHECK(rules.classify(404, 1) == outcome_kind::transient);
  CHECK(rules.classify(409, 1) == outcome_kind::transient);
  CHECK(rules.classify(529, 1) == outcome_kind::rate_limited);
  CHECK(rules.classify(503, 1) == outcome_kind::permanent);
  CHECK(rules.classify(200, 0) == outcome_kind::transient);
  auto refused = [](const std::string& table) -> std::string {
    try {
      parse_config("[sources.p]\ntype = \"http\"\n"
                   "base_url = \"http://127.0.0.1:9000\"\n"
                   "[sources.p.statuses]\n" +
                   table +
                   "[routes.\"/v1/chat/completions\"]\nsources = [\"p\"]\n");
    } catch (const config_error& e) {
      return e.key() + " line " + std::to_string(e.line()) + ": " +
             e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused("transient = [200]\n"),
             StartsWith("sources.p.statuses.transient line 5") &&
                 Contains("not in [300, 599]"));
  CHECK_THAT(refused("transient = [500]\npermanent = [\n  500]\n"),
             StartsWith("sources.p.statuses.permanent line 7") &&
                 Contains("classed twice"));
  CHECK_THAT(refused("transient = [\"404\"]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("integers"));
  CHECK_THAT(refused("transient = [99999999999]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("not in [300"));
  // 2^32 + 300: a cast to int would make it 300.
  CHECK_THAT(refused("transient = [4294967596]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("not in [300"));
  CHECK_THAT(refused("retriable = [500]\n"),
             StartsWith("sources.p.statuses.retriable") &&
                 Contains("unknown key"));
  CHECK_THAT(refused("empty_2xx_transient = 1\n"),
             StartsWith("sources.p.statuses.empty_2xx_transient"));
}

TEST_CASE("a route's retry budget is read, and bad settings refused naming "
          "the key") {
  auto cfg = parse_config(std::string{minimal} + R"toml(
[routes."/v1/budgeted"]
sources = ["a"]
  [routes."/v1/budgeted".retry_budget]
  percent = 25
  min_concurrency = 2
  when_spent = "fail"
)toml");
  const route_config* budgeted = nullptr;
  for (auto& r : cfg.routes)
    if (r.route.name == "/v1/budgeted")
      budgeted = &r.route;
  REQUIRE(budgeted);
  REQUIRE(budgeted->retry_budget);
  CHECK(budgeted->retry_budget->percent == 25);
  CHECK(budgeted->retry_budget->min_concurrency == 2);
  CHECK(budgeted->retry_budget->when_spent == policy::when_budget_spent::fail);
  for (auto& r : cfg.routes)
    if (r.route.name == "/v1/chat/completions")
      CHECK_FALSE(r.route.retry_budget); // none unless configured
  auto refused = [](const std::string& table) -> std::string {
    try {
      parse_config(std::string{minimal} +
                   "[routes.\"/v1/b\"]\nsources = [\"a\"]\n"
                   "[routes.\"/v1/b\".retry_budget]\n" +
                   table);
    } catch (const config_error& e) {
      return e.key() + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK(refused("percent = 20\n").empty());
  CHECK_THAT(refused("percent = 120\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.percent") &&
                 Contains("[0, 100]"));
  CHECK_THAT(refused("percent = nan\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.percent"));
  CHECK_THAT(refused("min_concurrency = 0\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.min_concurrency"));
  CHECK_THAT(refused("min_concurrency = -1\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.min_concurrency"));
  CHECK_THAT(refused("when_spent = \"drop\"\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.when_spent") &&
                 Contains("\"wait\" or \"fail\""));
  CHECK_THAT(refused("percent = 20\n[routes.\"/v1/c\"]\nsources = [\"a\"]\n"
                     "max_ejection_percent = 150\n"),
             StartsWith("routes.\"/v1/c\".max_ejection_percent") &&
                 Contains("[0, 100]"));
  CHECK_THAT(refused("budget_percent = 20\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.budget_percent") &&
                 Contains("unknown key"));
}

TEST_CASE("remote sources are read with their address, timeouts and "
          "certificates, and bad ones refused naming the key") {
  auto& pki = sluice::testing::test_pki::get();
  auto tls = "[sources.tool.tls]\nca_file = \"" + pki.file("ca.pem") +
             "\"\ncert_file = \"" + pki.file("client.pem") +
             "\"\nkey_file = \"" + pki.file("client.key") + "\"\n";
  auto cfg = parse_config(R"toml(
[sources.tool]
type = "remote"
address = "127.0.0.1:7300"
connect_timeout_s = 0.5
reconnect_max_s = 2
[routes."/v1/chat/completions"]
sources = ["tool"]
)toml" + tls + "server_name = \"tools.internal\"\n");
  REQUIRE(cfg.sources.size() == 1);
  auto& s = cfg.sources[0];
  CHECK(s.type == "remote");
  CHECK(s.remote.host == "127.0.0.1");
  CHECK(s.remote.port == 7300);
  CHECK(s.remote.connect_timeout == 500ms);
  CHECK(s.remote.reconnect_max == 2s);
  CHECK(s.remote.tls.ca_file == pki.file("ca.pem"));
  CHECK(s.remote.tls.cert_file == pki.file("client.pem"));
  CHECK(s.remote.tls.key_file == pki.file("client.key"));
  CHECK(s.remote.tls.server_name == "tools.internal");
  auto refused = [](const std::string& body,
                    const std::string& after = "") -> std::string {
    try {
      parse_config("[sources.tool]\ntype = \"remote\"\n" + body +
                   "[routes.\"/v1/chat/completions\"]\nsources = "
                   "[\"tool\"]\n" +
                   after);
    } catch (const config_error& e) {
      return e.key() + " line " + std::to_string(e.line()) + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused(""), StartsWith("sources.tool.address") &&
                              Contains("missing"));
  CHECK_THAT(refused("address = \"127.0.0.1\"\n"),
             StartsWith("sources.tool.address") && Contains("needs a port"));
  CHECK_THAT(refused("address = \"127.0.0.1:0\"\n"),
             StartsWith("sources.tool.address"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\nbase_url = \"x\"\n"),
             StartsWith("sources.tool.base_url"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\nconnect_timeout_s = 0\n"),
             StartsWith("sources.tool.connect_timeout"));
  // Mutual TLS only: no [tls], or a file that is missing or unusable, is
  // refused naming the key and its line.
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n"),
             StartsWith("sources.tool.tls line 1") && Contains("mutual TLS"));
  auto bad_cert = tls;
  bad_cert.replace(bad_cert.find(pki.file("client.pem")),
                   pki.file("client.pem").size(), pki.file("not_a_cert.pem"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n", bad_cert),
             StartsWith("sources.tool.tls.cert_file line 8") &&
                 Contains("no certificate"));
  auto no_key = tls;
  no_key.replace(no_key.find(pki.file("client.key")),
                 pki.file("client.key").size(), "/nonexistent/node.key");
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n", no_key),
             StartsWith("sources.tool.tls.key_file") &&
                 Contains("cannot read"));
}
