// The MCP source over Streamable HTTP against a server that breaks the
// rules (SPEC §13, "think like an attacker"): floods, answers twice, never
// answers, garbage, 5xx, 429, an empty 200, a lost session, an oversized
// header. Each call gets one clear answer, retried only where safe, and the
// source keeps serving. A scripted server on loopback (a thread per
// connection); real time, short timeouts, no duration asserted.

#include "sluice/actors/mcp/mcp_source.hpp"

#include "mcp_source_shared.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fakes/script_upstream.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using json = nlohmann::json;
using sluice::testing::script_upstream;
using tcp = boost::asio::ip::tcp;

namespace {

std::string http(int status, const std::string& type, const std::string& body,
                 const std::string& extra = {}) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

std::string answer(const json& id, const json& result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump();
}

std::string event(const std::string& data) {
  return "event: message\ndata: " + data + "\n\n";
}

// An MCP server that misbehaves as each call's `arguments.mode` says.
struct hostile_mcp {
  std::atomic<int> sessions{0};
  std::atomic<bool> stop{false};
  /// Extra bytes in initialize's answer header (0: none).
  std::atomic<size_t> junk_header{0};
  /// Pings its GET stream sends (0: no stream, 405); the gateway's answers
  /// to them are held unanswered, and counted.
  std::atomic<int> pings{0};
  std::atomic<int> held{0};
  std::atomic<int> most_held{0};
  std::atomic<int> lost_once_answered{0};
  std::atomic<int> lost_sent{0};

  void hold(tcp::socket& s) {
    char c;
    boost::system::error_code ec;
    while (!stop && !ec)
      s.read_some(boost::asio::buffer(&c, 1), ec);
  }

  bool serve(script_upstream& up, tcp::socket& s, const std::string& req) {
    auto body_at = req.find("\r\n\r\n");
    auto body = body_at == std::string::npos ? "" : req.substr(body_at + 4);
    if (req.rfind("GET", 0) == 0) {
      if (pings == 0)
        return up.send(s, http(405, "text/plain", ""));
      std::string events;
      for (int i = 0; i < pings; ++i)
        events += event(json{
            {"jsonrpc", "2.0"},
            {"id", "p" + std::to_string(i)},
            {"method",
             "ping"}}.dump());
      up.send(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" +
                     events);
      hold(s);
      return false;
    }
    if (req.rfind("DELETE", 0) == 0)
      return up.send(s, http(200, "text/plain", ""));
    auto m = json::parse(body, nullptr, false);
    auto method = m.value("method", std::string{});
    if (!m.contains("id")) // a notification
      return up.send(s, http(202, "text/plain", ""));
    if (!m.contains("method")) { // an answer to one of its pings: held
      auto n = ++held;
      for (auto most = most_held.load();
           n > most && !most_held.compare_exchange_weak(most, n);)
        ;
      hold(s);
      --held;
      return false;
    }
    auto id = m["id"];
    if (method == "initialize") {
      auto sid = "s" + std::to_string(++sessions);
      std::string extra = "Mcp-Session-Id: " + sid + "\r\n";
      if (auto junk = junk_header.load(); junk > 0)
        extra += "X-Junk: " + std::string(junk, 'j') + "\r\n";
      return up.send(
          s, http(200, "application/json",
                  answer(id, {{"protocolVersion", "2025-06-18"},
                              {"capabilities", {{"tools", json::object()}}},
                              {"serverInfo", {{"name", "hostile"}}}}),
                  extra));
    }
    if (method == "tools/list") {
      json tools =
          json::array({{{"name", "w"}, {"inputSchema", {{"type", "object"}}}},
                       {{"name", "r"},
                        {"inputSchema", {{"type", "object"}}},
                        {"annotations", {{"readOnlyHint", true}}}}});
      return up.send(
          s, http(200, "application/json", answer(id, {{"tools", tools}})));
    }
    auto mode = m["params"]["arguments"].value("mode", std::string{"ok"});
    json ok{{"content", json::array({{{"type", "text"}, {"text", mode}}})}};
    if (mode == "ok")
      return up.send(s, http(200, "application/json", answer(id, ok)));
    if (mode == "sse_flood" || mode == "twice") {
      std::string events;
      if (mode == "sse_flood") {
        json progress{
            {"jsonrpc", "2.0"},
            {"method", "notifications/progress"},
            {"params", {{"progressToken", "nobody"}, {"progress", 1}}}};
        for (int i = 0; i < 5000; ++i)
          events += event(progress.dump());
        events += event(std::string(10000, 'x')); // over max_message_bytes
      }
      events += event(answer(id, ok));
      if (mode == "twice")
        events += event(answer(id, ok));
      return up.send(s, http(200, "text/event-stream", events));
    }
    if (mode == "silent") { // holds the request until the client leaves
      char c;
      boost::system::error_code ec;
      while (!stop && !ec)
        s.read_some(boost::asio::buffer(&c, 1), ec);
      return false;
    }
    if (mode == "s500")
      return up.send(s, http(500, "application/json", "{}"));
    if (mode == "s429")
      return up.send(
          s, http(429, "text/plain", "slow down", "Retry-After: 1\r\n"));
    if (mode == "empty200")
      return up.send(s, http(200, "application/json", ""));
    if (mode == "garbage")
      return up.send(s, http(200, "application/json", "not json{"));
    if (mode == "lost") {
      ++lost_sent;
      return up.send(s, http(404, "application/json", "{}"));
    }
    if (mode == "own404") // this request's own refusal, not the session's
      return up.send(
          s, http(404, "application/json",
                  json{{"jsonrpc", "2.0"},
                       {"id", id},
                       {"error", {{"code", -32601}, {"message", "no tool"}}}}
                      .dump()));
    if (mode == "slow") { // answers after 600 ms
      std::this_thread::sleep_for(600ms);
      return up.send(s, http(200, "application/json", answer(id, ok)));
    }
    if (mode == "lost_once") { // the first session is forgotten (a restart)
      if (req.find("Mcp-Session-Id: s1\r\n") != std::string::npos)
        return up.send(s, http(404, "application/json", "{}"));
      ++lost_once_answered;
      return up.send(s, http(200, "application/json", answer(id, ok)));
    }
    return up.send(s, http(400, "text/plain", "?"));
  }
};

struct fixture {
  hostile_mcp mcp;
  std::unique_ptr<script_upstream> server = serve_on(0);
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  mcp_source src;
  std::chrono::milliseconds idle_timeout = 400ms;

  std::unique_ptr<script_upstream> serve_on(uint16_t port) {
    return std::make_unique<script_upstream>(
        [this](script_upstream& up, tcp::socket& s, const std::string& req) {
          return mcp.serve(up, s, req);
        },
        port);
  }

  void start() {
    mcp_server_settings c;
    c.name = "hostile";
    c.prefix = "h_";
    c.transport = mcp_transport::http;
    c.url = server->url() + "/mcp";
    c.idle_timeout = idle_timeout;
    c.init_timeout = 2s;
    c.restart_backoff = 50ms;
    c.restart_backoff_max = 200ms;
    c.stop_grace = 500ms;
    c.max_message_bytes = 4096;
    src = spawn_mcp_source(sys, c);
  }

  ~fixture() {
    mcp.stop = true;
    caf::anon_send_exit(src.actor, caf::exit_reason::user_shutdown);
  }

  template <class Pred>
  bool wait_until(Pred p, std::chrono::milliseconds most = 5s) {
    return mcp_source_test::wait_until(p, most);
  }

  bool ready() { return mcp_source_test::ready(src); }

  source_reply call(const std::string& tool, const std::string& mode) {
    return mcp_source_test::call(
        sys, src, mcp_source_test::request("mcp:hostile", tool, mode));
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "mcp http source: floods, twice, garbage: each "
                          "call one answer, the rest counted") {
  start();
  REQUIRE(ready());
  auto r = call("w", "ok");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(r.body.find("\"ok\"") != std::string::npos);
  // 5,000 notifications for no call of ours and an event over the limit,
  // then the answer: answered; the oversized event counted.
  auto bad = src.view->bad_lines.load();
  r = call("w", "sse_flood");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(src.view->bad_lines.load() == bad + 1);
  CHECK(src.view->progress.load() == 0);
  // Answered twice: the first is the call's, the second a bad line.
  bad = src.view->bad_lines.load();
  r = call("w", "twice");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(wait_until([&] { return src.view->bad_lines.load() == bad + 1; }));
  // Garbage for a body: counted, and the call fails at once (not at its
  // idle timeout), unsafe to send again: the server had it.
  bad = src.view->bad_lines.load();
  r = call("w", "garbage");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK(r.unsafe_to_retry);
  CHECK(src.view->bad_lines.load() == bad + 1);
  // An empty 200: the same.
  r = call("w", "empty200");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK(r.unsafe_to_retry);
  CHECK(r.reason.find("without the answer") != std::string::npos);
  // Still serving.
  CHECK(call("r", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: statuses say how far a call got "
                          "(retry safety)") {
  start();
  REQUIRE(ready());
  // 5xx: the server may have run it: a tool with effects is not retried,
  // a read-only one may be.
  auto r = call("w", "s500");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK(r.unsafe_to_retry);
  r = call("r", "s500");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK_FALSE(r.unsafe_to_retry);
  // 429: its admission turned it away: safe even with effects.
  r = call("w", "s429");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK_FALSE(r.unsafe_to_retry);
  // Silent past idle_timeout: a timeout, unsafe for the tool with effects.
  r = call("w", "silent");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK(r.unsafe_to_retry);
  r = call("r", "silent");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK_FALSE(r.unsafe_to_retry);
}

TEST_CASE_METHOD(fixture, "mcp http source: a call whose session is lost "
                          "goes on the new one") {
  idle_timeout = 3s; // room for the restarts the call waits for
  start();
  REQUIRE(ready());
  // The server forgot session s1 (it restarted): the call, which it never
  // saw, is sent on the new session -- one attempt, answered (before, it
  // failed, and its caller spent a retry on the gateway's own session).
  auto r = call("w", "lost_once");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(mcp.lost_once_answered.load() == 1);
  CHECK(mcp.sessions.load() == 2);
  CHECK(src.view->read().restarts >= 1);
  // A server that loses every session is not chased for ever: the call
  // goes out 1 + max_session_resends times, then fails unsent (safe).
  r = call("w", "lost");
  CHECK(r.kind == policy::outcome_kind::transient);
  CHECK_FALSE(r.unsafe_to_retry);
  CHECK(mcp.lost_sent.load() == 3);
  REQUIRE(ready());
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: a server that stops listening is "
                          "down, and a call waits for it to come back") {
  idle_timeout = 3s; // how long the call may wait
  start();
  REQUIRE(ready());
  auto port = server->port();
  server.reset(); // nothing listens there now: connections are refused
  // A call meanwhile: its connection refused, the source starts a new
  // session (the status says down, not ready) and the call waits for it.
  std::atomic<bool> answered{false};
  source_reply r;
  std::thread caller{[&] {
    r = call("w", "ok");
    answered = true;
  }};
  CHECK(wait_until([&] {
    return src.view->read().state != mcp_server_view::state_kind::ready;
  }));
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(answered.load());
  server = serve_on(port); // the server is back, with no memory of s1
  caller.join();
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(mcp.sessions.load() == 2);
  CHECK(src.view->read().state == mcp_server_view::state_kind::ready);
}

TEST_CASE_METHOD(fixture, "mcp http source: an oversized answer header "
                          "fails initialize, and the source keeps trying") {
  mcp.junk_header = 100 * 1024; // past the 64 KiB header limit
  start();
  CHECK(wait_until([&] { return mcp.sessions.load() >= 3; }));
  auto s = src.view->read();
  CHECK(s.state != mcp_server_view::state_kind::ready);
  CHECK(s.restarts >= 2);
  // A call meanwhile waits for a start that never comes: it times out,
  // never sent, so safe to try again elsewhere.
  auto r = call("w", "ok");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK_FALSE(r.unsafe_to_retry);
  // The server behaves again: the source gets there.
  mcp.junk_header = 0;
  REQUIRE(ready());
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: a server that sends a thousand "
                          "pings gets a bounded number of sockets") {
  mcp.pings = 1000;
  start();
  REQUIRE(ready());
  // Each answer is a POST the server holds: at most max_quiet_exchanges
  // at once (before, one socket per ping).
  CHECK(wait_until([&] { return mcp.most_held.load() >= 64; }));
  std::this_thread::sleep_for(300ms);
  CHECK(mcp.most_held.load() == 64);
  // Its calls still go.
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: a 404 that answers the request "
                          "itself keeps the session") {
  start();
  REQUIRE(ready());
  // The server's own JSON-RPC error, with the call's id: passed on as the
  // call's answer (permanent), and nobody else's session is ended (before,
  // every such call ended the session all calls share, and was sent again).
  auto r = call("w", "own404");
  CHECK(r.kind == policy::outcome_kind::permanent);
  CHECK(r.body.find("no tool") != std::string::npos);
  CHECK(mcp.sessions.load() == 1);
  CHECK(src.view->read().restarts == 0);
  CHECK(call("w", "ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: a call that waited for a "
                          "restart gets its whole idle_timeout once sent") {
  idle_timeout = 800ms;
  start();
  REQUIRE(ready());
  auto port = server->port();
  server.reset();
  source_reply r;
  std::thread caller{[&] { r = call("w", "slow"); }};
  CHECK(wait_until([&] {
    return src.view->read().state != mcp_server_view::state_kind::ready;
  }));
  // Back after ~250 ms; the call is sent at the next start and answered
  // 600 ms later: past 800 ms from its arrival, within 800 ms of its
  // sending (before, it was cancelled as silent while the server worked).
  std::this_thread::sleep_for(250ms);
  server = serve_on(port);
  caller.join();
  CHECK(r.kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "mcp http source: a server that stays down fails "
                          "waiting calls unsent at init_timeout") {
  idle_timeout = 5s;
  start();
  REQUIRE(ready());
  server.reset();
  // init_timeout is 2 s here: the call does not wait its 5 s idle timeout.
  auto r = call("w", "ok");
  CHECK(r.kind == policy::outcome_kind::timeout);
  CHECK_FALSE(r.unsafe_to_retry);
  CHECK(r.reason.find("not ready") != std::string::npos);
}
