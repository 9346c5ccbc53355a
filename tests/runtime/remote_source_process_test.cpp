// A source in another process (examples/remote_source, the program a team
// copies) used by a sluice-node as `type = "remote"`, real processes both:
// calls go through it, streamed ones too; killed mid-attempt, the attempt fails
// transient at once and the call fails over, the breaker counting it; the node
// connects again when it comes back; a call's cancellation (its attempt timed
// out) reaches the remote side, which frees the attempt; a remote that dies is
// reported broken in /healthz and /status until it is back; a black-holed
// remote address holds neither another remote source, nor the node's
// shutdown, nor --check-config (which connects to nothing).

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "fakes/tls_upstream.hpp"
#include "loopback_http.hpp"
#include "node_process.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace std::chrono_literals;
using sluice::testing::child_process;
using sluice::testing::node_process;
using sluice::testing::test_pki;
using sluice::testing::write_config;
using namespace sluice::testing::loopback;

namespace {

using clock_type = std::chrono::steady_clock;

// The example program, serving its stub on `port` (0: any free one).
class remote_process {
public:
  remote_process(uint16_t port, int latency_ms)
      : child_{{SLUICE_REMOTE_SOURCE_BINARY, "--port", std::to_string(port),
                "--latency-ms", std::to_string(latency_ms), "--ca-file",
                test_pki::get().file("ca.pem"), "--cert-file",
                test_pki::get().file("server.pem"), "--key-file",
                test_pki::get().file("server.key")}} {
    constexpr std::string_view prefix = "remote source serving on 127.0.0.1:";
    auto l = child_.line_within(10s);
    if (!l || l->compare(0, prefix.size(), prefix) != 0)
      throw std::runtime_error("remote_source did not say where it serves: " +
                               l.value_or("(nothing)"));
    port_ = static_cast<uint16_t>(std::stoi(l->substr(prefix.size())));
  }

  uint16_t port() const { return port_; }

  // Its next line of output, if one comes within `limit`.
  std::optional<std::string> line_within(std::chrono::milliseconds limit) {
    return child_.line_within(limit);
  }

  void kill() {
    child_.signal(SIGKILL);
    child_.wait_status();
  }

private:
  child_process child_;
  uint16_t port_ = 0;
};

// The node's `[sources.NAME.tls]`: the test CA, the client certificate.
std::string node_tls(const std::string& name) {
  auto& pki = test_pki::get();
  return "  [sources." + name + ".tls]\n  ca_file = \"" + pki.file("ca.pem") +
         "\"\n  cert_file = \"" + pki.file("client.pem") +
         "\"\n  key_file = \"" + pki.file("client.key") + "\"\n";
}

std::string remote_config(uint16_t port, const std::string& extra = "") {
  return "[kinds.chat]\nmax_attempts = 2\nbackoff_base_s = 0.01\n" + extra +
         "[sources.tool]\ntype = \"remote\"\naddress = \"127.0.0.1:" +
         std::to_string(port) + "\"\n" + node_tls("tool") +
         // Its breaker counts the failures while it is away but does not
         // open on the few of a test (which would hide the remote).
         "  [sources.tool.breaker]\n  window_size = 1000\n"
         "  min_samples = 1000\n"
         "[sources.backup]\ntype = \"simulated\"\n"
         "  [[sources.backup.phases]]\n  latency_min_ms = 1\n"
         "  latency_max_ms = 2\n"
         "[routes.\"/v1/chat/completions\"]\nsources = [\"tool\", "
         "\"backup\"]\n";
}

reply chat(const node_process& n) {
  return exchange(n.port(), http::verb::post, "/v1/chat/completions",
                  R"({"messages":[]})");
}

bool from_tool(const reply& r) {
  return r.status == 200 &&
         r.body.find(R"("tool":"stub")") != std::string::npos;
}

uint64_t tool_attempts(const node_process& n, const char* outcome) {
  auto doc = n.status();
  if (doc.is_null())
    return 0;
  for (auto& s : doc["sources"])
    if (s.value("name", "") == "tool")
      return s["attempts_by_outcome"].value(outcome, uint64_t{0});
  return 0;
}

} // namespace

TEST_CASE("node: calls go through a source in another process, which "
          "killed mid-attempt fails over at once and is used again when it "
          "comes back",
          "[node][remote]") {
  auto remote = std::make_unique<remote_process>(0, 20);
  auto port = remote->port();
  auto path = write_config("remote", remote_config(port));
  node_process node{path};
  // Connected within moments of the start.
  REQUIRE(eventually([&] { return from_tool(chat(node)); }, 5s));
  // A streamed call: the chunks cross to the connector, under a tag the
  // remote cannot guess, on to the governor and out to the client.
  auto streamed = exchange(node.port(), http::verb::post,
                           "/v1/chat/completions",
                           R"({"stream":true,"messages":[]})");
  CHECK(streamed.status == 200);
  CHECK(streamed.content_type.find("text/event-stream") != std::string::npos);
  CHECK(streamed.body.find(R"(data: {"tool":"stub")") != std::string::npos);
  CHECK(streamed.body.find("data: [DONE]") != std::string::npos);
  // A slow remote, killed while the node's attempt is in it.
  remote->kill();
  remote = std::make_unique<remote_process>(port, 3000);
  // Served meanwhile (by the backup while the node reconnects), then by
  // the slow remote.
  REQUIRE(eventually([&] { return from_tool(chat(node)); }, 10s));
  // The last call's metrics land after its answer went out.
  std::this_thread::sleep_for(200ms);
  auto transient = tool_attempts(node, "transient");
  std::optional<reply> slow;
  clock_type::duration took{};
  std::thread caller{[&] {
    auto t0 = clock_type::now();
    slow = chat(node);
    took = clock_type::now() - t0;
  }};
  std::this_thread::sleep_for(500ms); // the attempt is at the remote
  remote->kill();
  caller.join();
  REQUIRE(slow);
  INFO("the call took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
       << " ms, body " << slow->body);
  CHECK(slow->status == 200); // failed over to the backup
  CHECK_FALSE(from_tool(*slow));
  CHECK(took >= 500ms); // it was at the remote when it died
  CHECK(took < 2500ms); // not the remote's 3 s, nor the attempt's timeout
  // Counted as the call's metrics are (after its answer went out).
  CHECK(eventually([&] { return tool_attempts(node, "transient") > transient; },
                   2s));
  // Back on the same port: the node connects again by itself.
  remote = std::make_unique<remote_process>(port, 20);
  CHECK(eventually([&] { return from_tool(chat(node)); }, 10s));
  std::remove(path.c_str());
}

TEST_CASE("node: a call's cancellation reaches the source in the other "
          "process, which frees the attempt",
          "[node][remote]") {
  remote_process remote{0, 5000};
  // One attempt of at most 1 s: the governor ends it (its runner goes).
  auto path = write_config(
      "remotecancel",
      "[kinds.chat]\nmax_attempts = 1\ntimeout_s = 1\nstall_window_s = 2\n"
      "[sources.tool]\ntype = \"remote\"\naddress = \"127.0.0.1:" +
          std::to_string(remote.port()) + "\"\n" + node_tls("tool") +
          "[routes.\"/v1/chat/completions\"]\nsources = [\"tool\"]\n");
  node_process node{path};
  // Wait for the connection (an attempt before it fails at once).
  REQUIRE(eventually(
      [&] {
        auto t0 = clock_type::now();
        chat(node);
        return clock_type::now() - t0 >=
               900ms; // the attempt reached the remote
      },
      10s));
  std::optional<std::string> freed;
  while (auto l = remote.line_within(3s))
    if (l->find("freed: its requester went") != std::string::npos) {
      freed = l;
      break;
    }
  REQUIRE(freed);
  CHECK(freed->find("attempt 1 ") != std::string::npos);
  std::remove(path.c_str());
}

namespace {

// A loopback listener whose accept queue is full and never accepted: the
// kernel drops further SYNs, so a connect to it hangs until its timeout --
// an address that black-holes SYNs, offline.
class black_hole {
public:
  black_hole()
      : acceptor_{ioc_} {
    namespace net = boost::asio;
    using tcp = net::ip::tcp;
    acceptor_.open(tcp::v4());
    acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen(0);
    // Non-blocking connects fill the queue (Asio's connect would wait).
    for (int i = 0; i < 4; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(port());
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      fill_.push_back(fd);
    }
  }

  ~black_hole() {
    for (int fd : fill_)
      ::close(fd);
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<int> fill_;
};

json source_entry(const node_process& n, const std::string& name) {
  auto doc = n.status();
  if (doc.is_null())
    return nullptr;
  for (auto& s : doc["sources"])
    if (s.value("name", "") == name)
      return s;
  return nullptr;
}

json healthz(const node_process& n) {
  return exchange(n.port(), http::verb::get, "/healthz").doc();
}

} // namespace

TEST_CASE("node: a remote source that dies is reported broken in /healthz "
          "and /status until it is back",
          "[node][remote]") {
  auto remote = std::make_unique<remote_process>(0, 20);
  auto port = remote->port();
  auto path = write_config("remotehealth", remote_config(port));
  node_process node{path};
  REQUIRE(eventually([&] { return from_tool(chat(node)); }, 5s));
  CHECK(healthz(node).value("status", "") == "ok");
  CHECK(source_entry(node, "tool").value("health", "") == "ok");
  remote->kill();
  // Noticed at once (the connection closes with the process).
  CHECK(eventually(
      [&] { return healthz(node).value("status", "") == "degraded"; }, 3s));
  auto h = healthz(node);
  INFO(h.dump());
  CHECK(h["broken_sources"].value("tool", "").find("remote: lost") !=
        std::string::npos);
  auto s = source_entry(node, "tool");
  CHECK(s.value("health", "") == "broken");
  CHECK(s["broken_reason"].is_string());
  // Calls fail over meanwhile.
  CHECK(chat(node).status == 200);
  remote = std::make_unique<remote_process>(port, 20);
  CHECK(eventually([&] { return from_tool(chat(node)); }, 10s));
  CHECK(healthz(node).value("status", "") == "ok");
  CHECK(source_entry(node, "tool").value("health", "") == "ok");
  std::remove(path.c_str());
}

TEST_CASE("node: a black-holed remote address holds neither another remote "
          "source, nor --check-config, nor the node's shutdown",
          "[node][remote]") {
  black_hole hole;
  remote_process remote{0, 20};
  auto config =
      "[node]\nshutdown_grace_s = 2\n"
      "[kinds.chat]\nmax_attempts = 2\nbackoff_base_s = 0.01\n"
      "[sources.hole]\ntype = \"remote\"\naddress = \"127.0.0.1:" +
      std::to_string(hole.port()) + "\"\nconnect_timeout_s = 30\n" +
      node_tls("hole") +
      "[sources.tool]\ntype = \"remote\"\naddress = "
      "\"127.0.0.1:" +
      std::to_string(remote.port()) + "\"\n" + node_tls("tool") +
      "[routes.\"/v1/chat/completions\"]\nsources = [\"hole\", \"tool\"]\n";
  auto path = write_config("remotehole", config);
  // --check-config connects nothing: it answers at once.
  {
    auto t0 = clock_type::now();
    child_process check{{SLUICE_NODE_BINARY, "--check-config", path}};
    auto out = check.line();
    CHECK(check.wait_exit(std::chrono::seconds{20}) == 0);
    auto took = clock_type::now() - t0;
    INFO(out
         << " in "
         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
         << " ms");
    CHECK(took < 3s);
  }
  auto t0 = clock_type::now();
  std::optional<node_process> node{std::in_place, path};
  // The node starts, and the live remote serves within moments, while the
  // other one's connect hangs (its timeout is 30 s).
  REQUIRE(eventually([&] { return from_tool(chat(*node)); }, 5s));
  CHECK(clock_type::now() - t0 < 5s);
  auto hole_entry = source_entry(*node, "hole");
  CHECK(hole_entry.value("health", "") == "broken");
  // SIGTERM: the grace (2 s) bounds the shutdown, the hanging connect
  // included.
  auto t1 = clock_type::now();
  node->signal(SIGTERM);
  auto took = clock_type::now() - t1;
  INFO("stopped in "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
       << " ms");
  CHECK(took < 3s);
  std::remove(path.c_str());
}
