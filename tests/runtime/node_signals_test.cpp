// sluice-node and signals (the built binary, real signals, SPEC §7): SIGHUP,
// SIGUSR1, SIGUSR2 and SIGPIPE never kill the node; SIGTERM drains and
// exits 0. Also the command line: --listen is parsed strictly, and
// --check-config is a dry run that accepts what the start accepts.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.hpp"
#include "loopback_http.hpp"

using namespace std::chrono_literals;
using namespace sluice::testing::loopback;

namespace {

// sluice-node with `args`; stdout and stderr on one pipe.
struct node_run : sluice::testing::child_process {
  explicit node_run(std::vector<std::string> args)
    : child_process(with_binary(std::move(args)), options{true, false, {}}) {
  }
  uint16_t port() { return listening_port(); }

private:
  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    args.insert(args.begin(), SLUICE_NODE_BINARY);
    return args;
  }
};

std::string write_file(const std::string& name, const std::string& text) {
  auto path = "/tmp/sluice-" + name + "-" + std::to_string(getpid()) + ".toml";
  std::ofstream{path} << text;
  return path;
}

const std::string minimal_routes = "[sources.a]\ntype = \"simulated\"\n"
                                   "[routes.\"/v1/chat/completions\"]\n"
                                   "sources = [\"a\"]\n";

} // namespace

TEST_CASE("node: SIGHUP, SIGUSR1, SIGUSR2 and SIGPIPE never kill the node, "
          "SIGTERM drains and exits 0",
          "[node][signals]") {
  node_run node{{"--listen", "127.0.0.1:0"}};
  auto port = node.port();
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  for (int sig : {SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGHUP}) {
    INFO("signal " << sig);
    node.signal(sig);
    std::this_thread::sleep_for(100ms);
    REQUIRE(node.alive());
    CHECK(exchange(port, http::verb::get, "/healthz").status == 200);
  }
  // Still governing calls after the signals.
  auto r = exchange(port, http::verb::post, "/v1/chat/completions",
                    R"({"messages":[]})", "s");
  CHECK(r.status == 200);
  node.signal(SIGTERM);
  CHECK(node.wait_exit() == 0);
}

TEST_CASE("node: SIGHUP reloads the config file, a bad one is refused and "
          "the node serves on",
          "[node][signals][reload]") {
  auto path = write_file("sighup", minimal_routes);
  node_run node{{"--config", path, "--listen", "127.0.0.1:0"}};
  auto port = node.port();
  auto status = [&] {
    return exchange(port, http::verb::get, "/status").doc();
  };
  auto until = [&](auto done) {
    for (int i = 0; i < 500 && !done(); ++i)
      std::this_thread::sleep_for(10ms);
    return done();
  };
  REQUIRE(status()["config"]["generation"] == 1);
  CHECK(exchange(port, http::verb::post, "/v1/embeddings", R"({"input":"x"})")
            .status == 404);
  write_file("sighup", minimal_routes +
                           "[routes.\"/v1/embeddings\"]\nkind = "
                           "\"embeddings\"\nsources = [\"a\"]\n");
  node.signal(SIGHUP);
  REQUIRE(until([&] { return status()["config"]["generation"] == 2; }));
  CHECK(exchange(port, http::verb::post, "/v1/embeddings", R"({"input":"x"})")
            .status == 200);
  write_file("sighup", "[routes.\"/v1/chat/completions\"]\nsources = []\n");
  node.signal(SIGHUP);
  REQUIRE(until([&] { return status()["config"]["reloads_refused"] == 1; }));
  REQUIRE(node.alive());
  auto st = status();
  CHECK(st["config"]["generation"] == 2);
  CHECK(st["config"]["last_refusal"].get<std::string>().find("sources") !=
        std::string::npos);
  CHECK(exchange(port, http::verb::post, "/v1/embeddings", R"({"input":"x"})")
            .status == 200);
  node.signal(SIGTERM);
  CHECK(node.wait_exit() == 0);
  std::remove(path.c_str());
}

TEST_CASE("node: SIGUSR1 reopens the access log: after a rename, lines go "
          "to a new file at the old path",
          "[node][signals][access_log]") {
  auto log = "/tmp/sluice-usr1-" + std::to_string(getpid()) + ".log";
  auto rotated = log + ".1";
  std::remove(log.c_str());
  std::remove(rotated.c_str());
  auto path = write_file("usr1", "[node]\naccess_log = \"" + log + "\"\n" +
                                     minimal_routes);
  node_run node{{"--config", path, "--listen", "127.0.0.1:0"}};
  auto port = node.port();
  auto lines = [](const std::string& file) {
    std::ifstream in{file};
    int n = 0;
    for (std::string line; std::getline(in, line);)
      ++n;
    return n;
  };
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  REQUIRE(lines(log) == 1);
  REQUIRE(std::rename(log.c_str(), rotated.c_str()) == 0);
  node.signal(SIGUSR1);
  // The reopen runs on the node's signal thread: the next lines go to the
  // new file once it exists.
  for (int i = 0; i < 500 && !std::ifstream{log}; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(node.alive());
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  CHECK(lines(log) == 1);
  CHECK(lines(rotated) == 1);
  node.signal(SIGTERM);
  CHECK(node.wait_exit() == 0);
  std::remove(log.c_str());
  std::remove(rotated.c_str());
  std::remove(path.c_str());
}

TEST_CASE("node: --listen is parsed strictly (no atoi)", "[node]") {
  for (auto bad : {"127.0.0.1:80x", "127.0.0.1:", "127.0.0.1", ":80",
                   "127.0.0.1:99999", "::1:80"}) {
    INFO(bad);
    node_run node{{"--listen", bad}};
    auto out = node.line();
    CHECK(out.find("--listen") != std::string::npos);
    CHECK(node.wait_exit() == 2);
  }
}

TEST_CASE("node: --check-config is a dry run that accepts what the start "
          "accepts",
          "[node]") {
  // Host names and bracketed IPv6 pass the check; "[::1]:0" used to pass
  // it and then fail the start ("[::1]" is no address for make_address).
  for (auto listen : {"localhost:0", "[::1]:0"}) {
    INFO(listen);
    auto path =
        write_file("listen", "[node]\nlisten = \"" + std::string{listen} +
                                 "\"\n" + minimal_routes);
    node_run check{{"--check-config", path}};
    CHECK(check.line().find("is valid") != std::string::npos);
    CHECK(check.wait_exit() == 0);
  }
  // ... and the start takes what the check took: the front resolves host
  // names and binds unbracketed IPv6.
  for (auto [listen, shown] :
       {std::pair{"localhost:0", "listening on http://localhost:"},
        std::pair{"[::1]:0", "listening on http://[::1]:"}}) {
    INFO(listen);
    auto path = write_file("listen-start", "[node]\nlisten = \"" +
                                               std::string{listen} + "\"\n" +
                                               minimal_routes);
    node_run start{{"--config", path}};
    auto said = start.line();
    while (!said.empty() && said.find("listening") == std::string::npos)
      said = start.line(); // a log line before it
    CHECK(said.find(shown) != std::string::npos);
    start.signal(SIGTERM);
    CHECK(start.wait_exit() == 0);
  }
  // 2e9 buckets: refused by the check, naming key and line (it used to
  // pass, then kill the breaker actor with bad_alloc at start).
  auto path = write_file(
      "buckets", minimal_routes + "[sources.a.breaker]\nwindow = \"time\"\n"
                                  "window_buckets = 2000000000\n");
  node_run check{{"--check-config", path}};
  auto out = check.line();
  CHECK(out.find("line 7: sources.a.breaker.window_buckets") !=
        std::string::npos);
  CHECK(check.wait_exit() == 2);
  node_run start{{"--config", path}};
  CHECK(start.line().find("sources.a.breaker.window_buckets") !=
        std::string::npos);
  CHECK(start.wait_exit() == 2);
}
