// Hostile clients and upstreams, the shared part: scripted upstream answers,
// the node under test, a client that never reads, helpers on raw answers.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "fakes/script_upstream.hpp"
#include "loopback_http.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::script_upstream;
using namespace sluice::testing::loopback;

namespace node_hostile_test_support {

// -- scripted upstream answers ----------------------------------------------

// 200, a chunked event stream of `events` small OpenAI chunks, each in a
// chunk of its own (the worst case for a frame-counting writer).
inline bool fast_stream(script_upstream& up, tcp::socket& s, int events) {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < events; ++i) {
    auto ev = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
              "\"delta\":{\"content\":\"tok" +
              std::to_string(i) + "\"}}]}\n\n";
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", ev.size());
    out += size + ev + "\r\n";
    if (out.size() > 64 * 1024) {
      if (!up.send(s, out))
        return false;
      out.clear();
    }
  }
  std::string done = "data: [DONE]\n\n";
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", done.size());
  out += size + done + "\r\n0\r\n\r\n";
  return up.send(s, out);
}

inline bool not_found(script_upstream& up, tcp::socket& s) {
  return up.send(s, "HTTP/1.1 404 Not Found\r\nContent-Type: "
                    "application/json\r\nContent-Length: 2\r\n\r\n{}");
}

// -- the node ---------------------------------------------------------------

// `@` stands for the upstream's URL.
inline const char* hostile_config = R"toml(
seed = 7

[node]
max_body_bytes = 2000000
shutdown_grace_s = 1
max_connections = 400
max_event_subscribers = 300
events_ping_s = 0.2

[admission]
session_cap = 64
wait_timeout_s = 2

[kinds.chat]
max_attempts = 1
stall_window_s = 5
timeout_s = 30
backoff_base_s = 0.05
poll_interval_s = 0.1

[sources.up]
type = "http"
base_url = "@"

[routes."/v1/chat/completions"]
sources = ["up"]
)toml";

struct hostile_node {
  std::unique_ptr<script_upstream> upstream;
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<http_front> front;

  explicit hostile_node(script_upstream::answer_fn answer,
                        std::string config = hostile_config) {
    upstream = std::make_unique<script_upstream>(std::move(answer));
    for (auto at = config.find('@'); at != std::string::npos;
         at = config.find('@', at + 1))
      config.replace(at, 1, upstream->url());
    add_error_category(caf_cfg);
    use_loop_scheduler(caf_cfg, 2); // as sluice-node: on event loops
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    auto cfg = parse_config(config, "hostile.toml");
    cfg.node.listen_host = "127.0.0.1";
    cfg.node.listen_port = 0;
    rt = std::make_unique<runtime>(*sys, cfg.runtime);
    install(*rt, cfg);
    front = std::make_unique<http_front>(*rt, cfg.node);
  }

  ~hostile_node() {
    front->shutdown(1s);
    front.reset();
    rt.reset();
    upstream.reset();
  }

  uint16_t port() const { return front->port(); }

  json status() const {
    auto r = exchange(port(), http::verb::get, "/status");
    return r.status == 200 ? r.doc() : json{};
  }

  bool healthy() const {
    return exchange(port(), http::verb::get, "/healthz").status == 200;
  }
};

// A connected socket with a small receive buffer that never reads.
struct silent_client {
  net::io_context ioc;
  tcp::socket socket{ioc};

  explicit silent_client(uint16_t port, const std::string& request) {
    socket.open(tcp::v4());
    socket.set_option(net::socket_base::receive_buffer_size(2048));
    socket.connect({net::ip::make_address("127.0.0.1"), port});
    net::write(socket, net::buffer(request));
  }
};

inline std::string post_text(const std::string& target, const std::string& body,
                             const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra +
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The body of a chunked HTTP response (header dropped, chunks joined).
inline std::string dechunk(const std::string& response) {
  std::string body;
  auto at = response.find("\r\n\r\n");
  if (at == std::string::npos)
    return body;
  at += 4;
  while (at < response.size()) {
    auto eol = response.find("\r\n", at);
    if (eol == std::string::npos)
      break;
    auto size = std::stoul(response.substr(at, eol - at), nullptr, 16);
    if (size == 0)
      break;
    body += response.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
  return body;
}

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

} // namespace node_hostile_test_support
