// sluice-node and signals (the built binary, real signals, SPEC §7): SIGHUP,
// SIGUSR1, SIGUSR2 and SIGPIPE never kill the node; SIGTERM drains and
// exits 0, also with a reload refused (a FIFO as a secret). Also the
// command line: --listen is parsed strictly, and --check-config is a dry
// run that accepts what the start accepts and refuses what it refuses.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <sys/stat.h>
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
          "to a new file at the old path, and SIGTERM loses none queued",
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
  // Written by the log's thread within its flush interval (1 s).
  REQUIRE(eventually([&] { return lines(log) == 1; }));
  REQUIRE(std::rename(log.c_str(), rotated.c_str()) == 0);
  node.signal(SIGUSR1);
  // The reopen runs on the node's signal thread: the next lines go to the
  // new file once it exists.
  for (int i = 0; i < 500 && !std::ifstream{log}; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(node.alive());
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  CHECK(eventually([&] { return lines(log) == 1; }));
  CHECK(lines(rotated) == 1);
  // Lines still queued at SIGTERM are written before the node exits.
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  REQUIRE(exchange(port, http::verb::get, "/healthz").status == 200);
  node.signal(SIGTERM);
  CHECK(node.wait_exit() == 0);
  CHECK(lines(log) == 3);
  CHECK(lines(rotated) == 1);
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

TEST_CASE("node: a reload whose admin key file is now a FIFO is refused at "
          "once, and SIGTERM stops the node within its grace period",
          "[node][signals][reload]") {
  // Issue 30, finding 6: the reload blocked opening the FIFO (nobody
  // writes to it), POST /admin/reload timed out, and SIGTERM left the node
  // running, its shutdown waiting for the reload.
  auto secret = "/tmp/sluice-fifo-secret-" + std::to_string(getpid());
  const std::string key = "fifo-test-admin-key-0123456789";
  std::remove(secret.c_str());
  std::ofstream{secret} << key << "\n";
  auto path = write_file("fifo-secret", "[node]\nshutdown_grace_s = 2\n"
                                        "[auth]\nadmin_key = \"file:" +
                                            secret + "\"\n" + minimal_routes);
  node_run node{{"--config", path, "--listen", "127.0.0.1:0"}};
  auto port = node.port();
  header_list admin{{"Authorization", "Bearer " + key}};
  std::remove(secret.c_str());
  REQUIRE(::mkfifo(secret.c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  auto r = exchange_with(port, http::verb::post, "/admin/reload", "", admin);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(r.status == 422);
  CHECK(r.body.find("line 4: auth.admin_key") != std::string::npos);
  CHECK(r.body.find("is a FIFO, not a regular file") != std::string::npos);
  CHECK(took < 2s);
  // SIGHUP, then SIGTERM while that reload may still run.
  node.signal(SIGHUP);
  node.signal(SIGTERM);
  start = std::chrono::steady_clock::now();
  CHECK(node.wait_exit(std::chrono::seconds{10}) == 0);
  CHECK(std::chrono::steady_clock::now() - start < 2s + 3s); // grace + exit
  std::remove(secret.c_str());
  std::remove(path.c_str());
}

TEST_CASE("node: --check-config applies the start's rules for listeners and "
          "the access log, and the start refuses the same before it binds "
          "or creates anything",
          "[node]") {
  // Issue 30, finding 9: each passed the check, then failed the start
  // (after binding) or made it create a directory.
  auto missing_dir = "/tmp/sluice-no-dir-" + std::to_string(getpid());
  struct bad_case {
    std::string node_table;
    std::string named;
  };
  std::vector<bad_case> cases{
      {"listen = \"0.0.0.0:0\"\n", "line 2: auth: node.listen 0.0.0.0"},
      {"access_log = \"" + missing_dir + "/access.log\"\n",
       "line 2: node.access_log: '" + missing_dir + "/access.log' is in '" +
           missing_dir + "', which does not exist"},
      {"access_log = \"/tmp\"\n",
       "line 2: node.access_log: '/tmp' is a directory"},
      {"listen = \"127.0.0.1:47\"\nadmin_listen = \"127.0.0.1:47\"\n",
       "line 3: node.admin_listen: 127.0.0.1:47 takes the port of "
       "node.listen"},
      {"listen = \"127.0.0.1:47\"\nadmin_listen = \"0.0.0.0:47\"\n",
       "line 3: node.admin_listen"},
  };
  for (auto& c : cases) {
    INFO(c.node_table);
    auto path = write_file("start-rules", "[node]\n" + c.node_table +
                                              minimal_routes);
    node_run check{{"--check-config", path}};
    auto checked = check.rest();
    CHECK(check.wait_exit() == 2);
    CHECK(checked.find(c.named) != std::string::npos);
    node_run start{{"--config", path}};
    auto started = start.rest();
    CHECK(start.wait_exit() == 2);
    CHECK(started.find(c.named) != std::string::npos);
    CHECK(started.find("listening on") == std::string::npos);
    std::remove(path.c_str());
  }
  struct stat st {};
  CHECK(::stat(missing_dir.c_str(), &st) != 0); // nothing created
  // A --listen given with the check is checked as the start would use it
  // (before: the check ignored it and passed).
  auto path = write_file("start-rules-flag", "[node]\n" + minimal_routes);
  node_run check{{"--check-config", path, "--listen", "0.0.0.0:0"}};
  auto checked = check.rest();
  CHECK(check.wait_exit() == 2);
  CHECK(checked.find("node.listen 0.0.0.0") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("node: an admin listener on a port in use passes --check-config "
          "(which binds nothing) and fails the start at once, naming "
          "node.admin_listen (node.listen for the main one)",
          "[node]") {
  net::io_context ioc;
  tcp::acceptor taken{ioc, {net::ip::make_address("127.0.0.1"), 0}};
  auto port = taken.local_endpoint().port();
  auto path = write_file("admin-taken",
                         "[node]\nlisten = \"127.0.0.1:0\"\nadmin_listen = "
                         "\"127.0.0.1:" +
                             std::to_string(port) + "\"\n" + minimal_routes);
  node_run check{{"--check-config", path}};
  CHECK(check.line().find("is valid") != std::string::npos);
  CHECK(check.wait_exit() == 0);
  node_run start{{"--config", path}};
  auto out = start.rest();
  CHECK(start.wait_exit() == 1);
  CHECK(out.find("node.admin_listen: cannot listen on 127.0.0.1:" +
                 std::to_string(port)) != std::string::npos);
  CHECK(out.find("listening on") == std::string::npos);
  // The main listener on it: named the same way.
  path = write_file("admin-taken", "[node]\nlisten = \"127.0.0.1:" +
                                       std::to_string(port) + "\"\n" +
                                       minimal_routes);
  node_run main_taken{{"--config", path}};
  out = main_taken.rest();
  CHECK(main_taken.wait_exit() == 1);
  CHECK(out.find("node.listen: cannot listen on 127.0.0.1:" +
                 std::to_string(port)) != std::string::npos);
  std::remove(path.c_str());
}
