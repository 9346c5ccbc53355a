// sluice-node under hostile traffic (SPEC §7), over real sockets on
// loopback: the outside review's findings against the front, each as a
// test. Upstreams are scripted (tests/fakes/script_upstream.hpp) so they can
// stream fast, answer errors in floods or hang.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <memory>
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

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::script_upstream;
using namespace sluice::testing::loopback;

namespace {

// -- scripted upstream answers ----------------------------------------------

// 200, a chunked event stream of `events` small OpenAI chunks, each in a
// chunk of its own (the worst case for a frame-counting writer).
bool fast_stream(script_upstream& up, tcp::socket& s, int events) {
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

bool not_found(script_upstream& up, tcp::socket& s) {
  return up.send(s, "HTTP/1.1 404 Not Found\r\nContent-Type: "
                    "application/json\r\nContent-Length: 2\r\n\r\n{}");
}

// -- the node ---------------------------------------------------------------

// `@` stands for the upstream's URL.
const char* hostile_config = R"toml(
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

std::string post_text(const std::string& target, const std::string& body,
                      const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra +
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The body of a chunked HTTP response (header dropped, chunks joined).
std::string dechunk(const std::string& response) {
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

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size()))
    ++n;
  return n;
}

} // namespace

// -- critical: the streaming writer -------------------------------------------

TEST_CASE("hostile: a client reading a fast 20,000-event stream gets all of "
          "it, twice",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return fast_stream(up, s, 20000);
  }};
  auto request = post_text("/v1/chat/completions", R"({"stream":true})");
  for (int round = 0; round < 2; ++round) {
    stream_client c{node.port()};
    net::write(c.stream.socket(), net::buffer(request));
    REQUIRE(c.read_until("0\r\n\r\n", 30s));
    CHECK(c.all.rfind("HTTP/1.1 200", 0) == 0);
    auto body = dechunk(c.all);
    CHECK(count(body, "chat.completion.chunk") == 20000);
    CHECK(count(body, "\n\n") == 20001);
    CHECK(c.has("data: [DONE]"));
    CHECK_FALSE(c.has("event: error"));
  }
  CHECK(node.healthy());
  CHECK(node.status()["refused"]["stream_clients_dropped"] == 0);
}

TEST_CASE("hostile: a streamed call whose client never reads is dropped and "
          "cancelled, the node unharmed",
          "[node][hostile]") {
  // 30 MB of events: far past the 8 MiB a slow client may have queued.
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return fast_stream(up, s, 250000);
  }};
  {
    silent_client c{node.port(),
                    post_text("/v1/chat/completions", R"({"stream":true})")};
    REQUIRE(eventually(
        [&] { return node.status()["refused"]["stream_clients_dropped"] == 1; },
        20s));
    // Dropped means cancelled: nothing is held for it any more.
    CHECK(eventually([&] { return node.status()["calls_in_flight"] == 0; }));
  }
  CHECK(node.healthy());
  // The node still streams to a reader.
  stream_client c{node.port()};
  net::write(c.stream.socket(),
             net::buffer(post_text("/v1/chat/completions", R"({"stream":true})")));
  CHECK(c.read_until("tok1000\"", 20s));
  c.close();
}

TEST_CASE("hostile: 200 /events clients that never read, while thousands of "
          "verdicts are published",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return not_found(up, s);
  }};
  std::vector<std::unique_ptr<silent_client>> silent;
  for (int i = 0; i < 200; ++i)
    silent.push_back(std::make_unique<silent_client>(
        node.port(),
        "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  REQUIRE(eventually(
      [&] { return node.status()["limits"]["event_subscribers"] == 200; }));
  // Each 404 is a verdict published to every subscriber (~90 bytes each).
  std::vector<std::thread> callers;
  std::atomic<int> answered{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      stream_client c{node.port()};
      for (int i = 0; i < 1500; ++i) {
        auto body = R"({"i":)" + std::to_string(i) + "}";
        c.send(http::verb::post, "/v1/chat/completions", body);
        auto r = read_reply(c.stream, c.ioc);
        if (r.status == 404)
          ++answered;
      }
    });
  for (auto& t : callers)
    t.join();
  CHECK(answered == 6000);
  // 6,000 verdicts x ~90 bytes pass the 256 KiB budget of each silent one
  // (and what the socket buffers take).
  CHECK(eventually([&] {
    return node.status()["refused"]["stream_clients_dropped"] == 200;
  }));
  CHECK(node.status()["limits"]["event_subscribers"] == 0);
  CHECK(node.healthy());
}

// -- critical: invalid UTF-8 --------------------------------------------------

TEST_CASE("hostile: invalid UTF-8 in a path, a target or a session id gets a "
          "JSON error, never a crash",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  auto r = raw_exchange(node.port(),
                        "GET /\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  CHECK(r.status == 404);
  REQUIRE(r.doc().is_object());
  CHECK(r.doc()["error"]["code"] == "not_found");
  r = raw_exchange(node.port(),
                   post_text("/v1/chat/completions\xc3\x28", "{}"));
  CHECK(r.status == 404);
  CHECK(r.doc().is_object());
  r = raw_exchange(node.port(),
                   post_text("/v1/chat/completions", "{}",
                             "X-Session-Id: \xff\xfe\r\n"));
  CHECK(r.status == 400);
  CHECK(r.doc()["error"]["code"] == "bad_request");
  // A body whose strings are not UTF-8 is not JSON.
  r = raw_exchange(node.port(),
                   post_text("/v1/chat/completions", "{\"m\":\"\xff\"}"));
  CHECK(r.status == 400);
  CHECK(node.status().is_object());
  CHECK(node.healthy());
}

// -- medium: /events bounded ----------------------------------------------------

TEST_CASE("hostile: /events subscribers leave with their connection, are "
          "capped, get a snapshot and pings",
          "[node][hostile]") {
  std::string config = hostile_config;
  config.replace(config.find("max_event_subscribers = 300"), 27,
                 "max_event_subscribers = 3  ");
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return not_found(up, s);
  },
                    config};
  // Connect-and-close floods leave nothing behind (no event published
  // meanwhile to find the dead ones).
  for (int i = 0; i < 500; ++i) {
    stream_client c{node.port()};
    c.send(http::verb::get, "/events");
    REQUIRE(c.read_until("event: snapshot"));
    c.close();
  }
  CHECK(eventually(
      [&] { return node.status()["limits"]["event_subscribers"] == 0; }));
  // The cap: three subscribers, the fourth is refused with a JSON 503.
  std::vector<std::unique_ptr<stream_client>> subs;
  for (int i = 0; i < 3; ++i) {
    subs.push_back(std::make_unique<stream_client>(node.port()));
    subs.back()->send(http::verb::get, "/events");
    REQUIRE(subs.back()->read_until("event: snapshot"));
  }
  CHECK(subs[0]->has(R"("source":"up")"));
  auto r = exchange(node.port(), http::verb::get, "/events");
  CHECK(r.status == 503);
  CHECK(r.doc()["error"]["code"] == "overloaded");
  // Pings every 0.2 s keep the stream alive.
  CHECK(subs[0]->read_until(": ping", 3s));
}

// -- low: HTTP/1.1 framing (RFC 9112) -------------------------------------------

TEST_CASE("hostile: ambiguous framing is refused, absolute-form and Expect: "
          "100-continue work",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}");
  }};
  auto p = node.port();
  auto smuggle = [&](const std::string& te) {
    return raw_exchange(
        p, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Transfer-Encoding: " +
               te + "\r\nContent-Length: 2\r\n\r\n{}");
  };
  CHECK(smuggle("chunked, gzip").status == 400);
  CHECK(smuggle("xchunked").status == 400);
  CHECK(smuggle("chunked").status == 400); // with Content-Length
  CHECK(raw_exchange(p,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Transfer-Encoding: gzip\r\n\r\n")
            .status == 400);
  CHECK(raw_exchange(p, "GET /healthz HTTP/1.1\r\n\r\n").status == 400);
  CHECK(raw_exchange(p, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
            .status == 400);
  CHECK(raw_exchange(p, "GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: "
                        "127.0.0.1\r\n\r\n")
            .status == 200);
  CHECK(raw_exchange(p, post_text("http://node:1/v1/chat/completions?x=1",
                                  "{}"))
            .status == 200);
  // A chunked body is fine.
  CHECK(raw_exchange(p,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            .status == 200);
  // Expect: 100-continue: the 100 comes before the body is sent.
  stream_client c{p};
  std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  net::write(c.stream.socket(), net::buffer(head));
  REQUIRE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n", 2s));
  net::write(c.stream.socket(), net::buffer(std::string{"{}"}));
  CHECK(c.read_until("{\"ok\":true}"));
  CHECK(c.has("HTTP/1.1 200"));
}

TEST_CASE("hostile: a request body is read whole however it arrives: with "
          "its header, split mid-body, chunked, or followed by a pipelined "
          "request in the same write",
          "[node][hostile]") {
  // The upstream answers each request with its own body.
  hostile_node node{[](script_upstream& up, tcp::socket& s,
                       const std::string& request) {
    auto body = request.substr(request.find("\r\n\r\n") + 4);
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body);
  }};
  auto write = [](stream_client& c, const std::string& bytes) {
    net::write(c.stream.socket(), net::buffer(bytes));
  };
  {
    // The header and the whole body in one write (parsed with the header).
    stream_client c{node.port()};
    write(c, post_text("/v1/chat/completions", R"({"n":1})"));
    REQUIRE(c.read_until(R"({"n":1})"));
  }
  {
    // The header, then the body in two pieces, each a while later.
    stream_client c{node.port()};
    auto text = post_text("/v1/chat/completions", R"({"n":"split"})");
    auto cut = text.find("\r\n\r\n") + 4 + 5;
    write(c, text.substr(0, text.find("\r\n\r\n") + 4));
    std::this_thread::sleep_for(50ms);
    write(c, text.substr(text.find("\r\n\r\n") + 4, 5));
    std::this_thread::sleep_for(50ms);
    write(c, text.substr(cut));
    REQUIRE(c.read_until(R"({"n":"split"})"));
  }
  {
    // Chunked, the last chunk a while after the first.
    stream_client c{node.port()};
    write(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"n\":\r\n");
    std::this_thread::sleep_for(50ms);
    write(c, "9\r\n\"chunked\"\r\n1\r\n}\r\n0\r\n\r\n");
    REQUIRE(c.read_until(R"({"n":"chunked"})"));
  }
  {
    // Two requests in one write: both answered, in order, on one
    // connection.
    stream_client c{node.port()};
    write(c, post_text("/v1/chat/completions", R"({"n":"first"})") +
                 post_text("/v1/chat/completions", R"({"n":"second"})"));
    REQUIRE(c.read_until(R"({"n":"second"})"));
    CHECK(c.all.find(R"({"n":"first"})") < c.all.find(R"({"n":"second"})"));
  }
  {
    // A chunk over node.max_body_bytes announced in the bytes that came
    // with the header: 413, found by the parse there.
    stream_client c{node.port()};
    write(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n1E8481\r\n{\"n\":");
    REQUIRE(c.read_until("HTTP/1.1 413"));
  }
  CHECK(node.upstream->requests == 5); // the pipelined pair is two
}

TEST_CASE("hostile: session ids are validated and bodies read with a depth "
          "limit",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  auto p = node.port();
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}",
                 std::string(128, 'a'))
            .status == 200);
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}",
                 std::string(129, 'a'))
            .status == 400);
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}", "a b")
            .status == 400);
  auto r = raw_exchange(p, post_text("/v1/chat/completions", "{}",
                                     "X-Session-Id: a\r\nX-Session-Id: b\r\n"));
  CHECK(r.status == 400);
  // A megabyte of '[' is refused at depth 64, without a document.
  r = exchange(p, http::verb::post, "/v1/chat/completions",
               "{\"a\":" + std::string(1000000, '['));
  CHECK(r.status == 400);
  CHECK(r.doc()["error"]["message"].get<std::string>().find("deeper") !=
        std::string::npos);
  CHECK(node.upstream->requests == 1);
}

// -- high: descriptors and connections ------------------------------------------

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

// -- low: shutdown ----------------------------------------------------------------

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

// -- low: /metrics escapes label values -----------------------------------------

TEST_CASE("hostile: /metrics escapes label values and parses with the "
          "Prometheus client's parser",
          "[node][hostile]") {
  std::string config = hostile_config;
  auto at = config.find("[sources.up]");
  config.replace(at, 12, R"([sources."a\"b\\c"])");
  config.replace(config.find(R"(sources = ["up"])"), 16,
                 R"(sources = ["a\"b\\c"])");
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
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

// -- high: file descriptors run out -------------------------------------------------

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
  sluice::testing::child_process node{
      {"/usr/bin/prlimit", "--nofile=128:128", SLUICE_NODE_BINARY, "--config",
       config, "--listen", "127.0.0.1:0"},
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
