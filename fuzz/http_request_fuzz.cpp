// Fuzz target: raw bytes from a client into the node's HTTP front.
//
// One node (its front on 127.0.0.1, zero-latency simulated sources) lives
// for the whole run. Each input is written to a fresh connection, which is
// then half-closed; the node must answer, close, or both — within a few
// seconds (a hang aborts: the node may never wait on a client that has
// finished sending), and never crash, leak or corrupt memory (ASan/UBSan).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"

namespace {

/// Longest wait for the node to finish with one input.
constexpr int answer_timeout_ms = 5000;

const char* config = R"toml(
[node]
max_body_bytes = 65536
max_connections = 64
max_event_subscribers = 8
# The corpus sends "Host: x": past the Host rule (request_access), into
# the bodies.
allowed_hosts = ["x"]

[admission]
wait_timeout_s = 0.5

[kinds.chat]
max_attempts = 2
stall_window_s = 1
timeout_s = 1
backoff_base_s = 0.001
backoff_cap_s = 0.002
poll_interval_s = 0.01

[sources.sim]
type = "simulated"
  [[sources.sim.phases]]
  latency_min_ms = 0
  latency_max_ms = 0
  transient_rate = 0.1
  permanent_rate = 0.1

[routes."/v1/chat/completions"]
sources = ["sim"]

[routes."/v1/embeddings"]
sources = ["sim"]
)toml";

struct node {
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<sluice::runtime> rt;
  std::unique_ptr<sluice::http_front> front;

  node() {
    sluice::add_error_category(caf_cfg);
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    auto cfg = sluice::parse_config(config, "fuzz.toml");
    cfg.node.listen_host = "127.0.0.1";
    cfg.node.listen_port = 0;
    rt = std::make_unique<sluice::runtime>(*sys, cfg.runtime);
    sluice::install(*rt, cfg);
    front = std::make_unique<sluice::http_front>(*rt, cfg.node, 1);
  }
};

node& the_node() {
  static node* n = new node; // lives until exit
  return *n;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto port = the_node().front->port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return 0;
  }
  size_t sent = 0;
  while (sent < size) {
    auto n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0)
      break; // the node closed early (e.g. refused a bad header): fine
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds{answer_timeout_ms};
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      std::fprintf(stderr,
                   "the node neither answered nor closed within "
                   "%d ms\n",
                   answer_timeout_ms);
      std::abort();
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      break; // closed (or reset): done
  }
  ::close(fd);
  return 0;
}
