// The config file: strict TOML with errors that name the key and the line.

#include "config_file_shared.hpp"

using namespace config_file_test_support;

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
