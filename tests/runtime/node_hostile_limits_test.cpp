// Hostile clients (continued): the connection cap, the shutdown's grace,
// /metrics label escaping, no file descriptors left.

#include "node_hostile_shared.hpp"

using namespace node_hostile_test_support;

TEST_CASE("hostile: beyond node.max_connections new connections are closed at "
          "once, and served again when some leave",
          "[node][hostile]") {
  std::string config = hostile_config;
  config.replace(config.find("max_connections = 400"), 21,
                 "max_connections = 40 ");
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
                      return not_found(up, s);
                    },
                    config};
  // 40 allowed: 39 mid-request ones, each with its header whole and its
  // body not sent (an idle one, or one whose header is not whole, would
  // make room for a new connection: node_connections_test), then a 40th
  // that is answered
  // (accepted after the 39, which connected before it: each loop's
  // listener accepts at once). No /status probe while full: it would be
  // the 41st.
  std::vector<std::unique_ptr<stream_client>> idle;
  const std::string header_without_body =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n";
  for (int i = 0; i < 39; ++i) {
    idle.push_back(std::make_unique<stream_client>(node.port()));
    net::write(idle.back()->stream.socket(), net::buffer(header_without_body));
  }
  stream_client last{node.port()};
  last.send(http::verb::get, "/healthz");
  REQUIRE(last.read_until("{\"status\":\"ok\"}"));
  // `last` is idle again now: once its next request's header is in, none
  // is.
  net::write(last.stream.socket(), net::buffer(header_without_body));
  REQUIRE(eventually([&] {
    return node.front->open_connections() == 40 &&
           node.front->idle_connections() == 0;
  }));
  // Full now, none idle: a 41st is closed without an answer.
  stream_client refused{node.port()};
  try {
    refused.send(http::verb::get, "/healthz");
  } catch (const std::exception&) {
    // reset already: closed it was
  }
  refused.read_until("never", 3s);
  CHECK(refused.closed);
  CHECK(refused.all.empty());
  last.close();
  idle.resize(30);
  CHECK(eventually([&] { return node.healthy(); }));
  auto st = node.status();
  CHECK(st["refused"]["connections"].get<int>() >= 1);
  CHECK(st["limits"]["fd_limit"].get<int>() > 0);
  CHECK(st["limits"]["fds_open"].get<int>() > 30);
}

// -- low: shutdown
// ----------------------------------------------------------------

TEST_CASE("hostile: a call cut off by the shutdown grace period gets a 503 "
          "shutting_down, not a reset",
          "[node][hostile]") {
  std::atomic<bool> release{false};
  hostile_node node{[&](script_upstream& up, tcp::socket& s, auto&&...) {
    while (!release)
      std::this_thread::sleep_for(10ms);
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  stream_client c{node.port()};
  c.send(http::verb::post, "/v1/chat/completions", "{}");
  REQUIRE(eventually([&] { return node.front->in_flight() == 1; }));
  auto left = node.front->shutdown(200ms);
  CHECK(left == 1);
  auto r = read_reply(c.stream, c.ioc);
  CHECK(r.status == 503);
  CHECK(r.doc()["error"]["code"] == "shutting_down");
  CHECK(r.retry_after == "1");
  release = true;
}

// -- low: /metrics escapes label values
// -----------------------------------------

TEST_CASE("hostile: /metrics escapes label values and parses with the "
          "Prometheus client's parser",
          "[node][hostile]") {
  std::string config = hostile_config;
  auto at = config.find("[sources.up]");
  config.replace(at, 12, R"([sources."a\"b\\c"])");
  config.replace(config.find(R"(sources = ["up"])"), 16,
                 R"(sources = ["a\"b\\c"])");
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
                      return up.send(
                          s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
                    },
                    config};
  CHECK(exchange(node.port(), http::verb::post, "/v1/chat/completions", "{}")
            .status == 200);
  auto m = exchange(node.port(), http::verb::get, "/metrics");
  REQUIRE(m.status == 200);
  CHECK(m.body.find(R"(sluice_breaker_state{source="a\"b\\c"} 0)") !=
        std::string::npos);
  auto path = "/tmp/sluice-metrics-" + std::to_string(node.port()) + ".txt";
  std::ofstream{path} << m.body;
  // Debian's python3-prometheus-client (scripts/install-deps.sh).
  auto script = path + ".py";
  std::ofstream{script} << R"py(import sys
from prometheus_client.parser import text_string_to_metric_families as parse
families = list(parse(open(sys.argv[1]).read()))
sources = [s.labels.get("source") for f in families for s in f.samples]
sys.exit(0 if 'a"b\\c' in sources else 3)
)py";
  auto cmd = "/usr/bin/python3 " + script + " " + path;
  CHECK(std::system(cmd.c_str()) == 0);
  std::remove(script.c_str());
  std::remove(path.c_str());
}

// -- high: file descriptors run out
// -------------------------------------------------

namespace {

// CPU seconds (user + system) process `pid` has used so far.
double cpu_seconds(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat{std::istreambuf_iterator<char>{in}, {}};
  auto fields = stat.substr(stat.rfind(')') + 2);
  std::istringstream is{fields};
  std::string skip;
  for (int i = 3; i < 14; ++i)
    is >> skip;
  double utime = 0, stime = 0;
  is >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

} // namespace

TEST_CASE("hostile: out of file descriptors, the node backs off instead of "
          "spinning and serves again when they come back",
          "[node][hostile]") {
  // Idle clients alone no longer run the node out of descriptors (its
  // connection cap fits under the limit: node_connections_test), but calls
  // do: each holds its client's descriptor and one upstream. Under a hard
  // limit of 128 (a cap of 64 clients), 64 calls an upstream holds (its
  // AIMD limit out of the way) need more descriptors than there are:
  // upstream connects fail (those calls end), and so do accepts.
  std::atomic<bool> release{false};
  script_upstream upstream{[&](script_upstream& up, tcp::socket& s, auto&&...) {
    while (!release)
      std::this_thread::sleep_for(10ms);
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  auto config = "/tmp/sluice-emfile-" + std::to_string(getpid()) + ".toml";
  std::ofstream{config} << "[node]\naccess_log = \"off\"\n"
                           "[kinds.chat]\nmax_attempts = 1\ntimeout_s = 60\n"
                           "[sources.up]\ntype = \"http\"\nbase_url = \""
                        << upstream.url()
                        << "\"\n[sources.up.aimd]\ninitial = 200\n"
                           "max = 200\n"
                           "[sources.up.breaker.outcomes]\n"
                           "transient = \"ignored\"\n"
                           "[routes.\"/v1/chat/completions\"]\n"
                           "sources = [\"up\"]\n";
  sluice::testing::child_process node{{"/usr/bin/prlimit", "--nofile=128:128",
                                       SLUICE_NODE_BINARY, "--config", config,
                                       "--listen", "127.0.0.1:0"},
                                      {true, true, {}}};
  auto port = node.listening_port();
  auto pid = node.pid();

  {
    std::vector<std::unique_ptr<stream_client>> calling;
    for (int i = 0; i < 200; ++i) {
      calling.push_back(std::make_unique<stream_client>(port));
      try {
        calling.back()->send(http::verb::post, "/v1/chat/completions", "{}");
      } catch (const std::exception&) {
        // closed by the node already
      }
    }
    std::this_thread::sleep_for(500ms);
    auto before = cpu_seconds(pid);
    std::this_thread::sleep_for(1s);
    auto used = cpu_seconds(pid) - before;
    // Before the back-off it burned more than a core re-arming accept.
    CHECK(used < 0.3);
    release = true;
  }
  // Descriptors are back: served again, and /status tells what happened.
  CHECK(eventually([&] {
    return exchange(port, http::verb::get, "/healthz").status == 200;
  }));
  auto st = exchange(port, http::verb::get, "/status").doc();
  REQUIRE(st.is_object());
  CHECK(st["limits"]["fd_limit"] == 128);
  CHECK(st["limits"]["connection_cap"] == 64);
  CHECK(st["refused"]["accept_errors"].get<int>() > 0);
  CHECK(eventually([&] {
    return exchange(port, http::verb::post, "/v1/chat/completions", "{}")
               .status == 200;
  }));
  node.signal(SIGKILL);
  for (auto& report : sluice::testing::undefined_behaviour(node.rest()))
    FAIL_CHECK("UBSan in the child: " << report);
  std::remove(config.c_str());
}
