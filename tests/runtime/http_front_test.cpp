// The HTTP front on loopback, against simulated sources on the real
// scheduler: routes, JSON errors with the right statuses, tool_busy with
// Retry-After, and a client disconnect cancelling its call.

#include "runtime/http_front.hpp"

#include <chrono>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "messages/atoms.hpp"
#include "messages/errors.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

namespace {

struct reply {
  unsigned status = 0;
  std::string body;
  std::string retry_after;

  json doc() const { return json::parse(body, nullptr, false); }
};

// One blocking HTTP/1.1 exchange on a fresh connection.
reply exchange(uint16_t port, http::verb method, const std::string& target,
               const std::string& body = "", const std::string& session = "") {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  stream.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (!session.empty())
    req.set("X-Session-Id", session);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(stream, req, ec);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  // A hung exchange fails in seconds instead of blocking the test (the
  // stream's timeout applies to asynchronous operations only).
  stream.expires_after(10s);
  beast::error_code read_ec;
  http::async_read(stream, buf, res,
                   [&](beast::error_code e, std::size_t) { read_ec = e; });
  ioc.run();
  if (ec || read_ec)
    return {0, "exchange failed: " + (ec ? ec : read_ec).message(), ""};
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return {res.result_int(), res.body(),
          std::string{res[http::field::retry_after]}};
}

sim_config latency(duration d) {
  sim_config s;
  s.phases[0].latency_min = s.phases[0].latency_max = d;
  return s;
}

template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  return pred();
}

struct fixture {
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<http_front> front;
  simulated_source fast, slow;

  fixture() {
    add_error_category(caf_cfg);
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    runtime_config cfg;
    cfg.admission.session_cap = 1;
    cfg.admission.wait_timeout = 200ms;
    cfg.kinds["chat"].max_attempts = 1;
    rt = std::make_unique<runtime>(*sys, cfg);
    fast = rt->add_simulated_source("fast", latency(1ms));
    slow = rt->add_simulated_source("slow", latency(3s));
    sim_config broken = latency(1ms);
    broken.phases[0].transient_rate = 1.0;
    rt->add_simulated_source("broken", broken);
    sim_config picky = latency(1ms);
    picky.phases[0].permanent_rate = 1.0;
    rt->add_simulated_source("picky", picky);
    rt->add_route({"/v1/chat/completions", "chat", {"fast"}, {}, {}});
    rt->add_route({"/slow", "chat", {"slow"}, {}, {}});
    rt->add_route({"/broken", "chat", {"broken"}, {}, {}});
    rt->add_route({"/picky", "chat", {"picky"}, {}, {}});
    node_settings ns;
    ns.listen_port = 0;
    ns.max_body_bytes = 256;
    front = std::make_unique<http_front>(*rt, ns);
  }

  ~fixture() { front->shutdown(1s); }

  uint16_t port() const { return front->port(); }
};

} // namespace

TEST_CASE_METHOD(fixture, "the node answers health checks and calls") {
  auto h = exchange(port(), http::verb::get, "/healthz");
  CHECK(h.status == 200);
  CHECK(h.doc()["status"] == "ok");
  auto r = exchange(port(), http::verb::post, "/v1/chat/completions",
                    R"({"messages":[]})");
  CHECK(r.status == 200);
  CHECK(r.doc()["object"] == "simulated");
}

TEST_CASE_METHOD(fixture,
                 "bad requests get the right status and a JSON error") {
  struct expectation {
    http::verb method;
    std::string target;
    std::string body;
    unsigned status;
    std::string type;
    int code;
  };
  std::vector<expectation> cases{
      {http::verb::post, "/v1/chat/completions", "{not json", 400,
       "bad_request", -32600},
      {http::verb::post, "/v1/chat/completions", "[1,2]", 400, "bad_request",
       -32600},
      {http::verb::post, "/nowhere", "{}", 404, "not_found", -32601},
      {http::verb::get, "/v1/chat/completions", "", 405, "method_not_allowed",
       -32020},
      {http::verb::post, "/v1/chat/completions",
       "{\"x\":\"" + std::string(400, 'a') + "\"}", 413, "payload_too_large",
       -32021},
  };
  for (auto& c : cases) {
    INFO(c.target << " expecting " << c.status);
    auto r = exchange(port(), c.method, c.target, c.body);
    CHECK(r.status == c.status);
    auto doc = r.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["error"]["type"] == c.type);
    CHECK(doc["error"]["code"] == c.code);
    CHECK(doc["error"]["message"].is_string());
  }
  // Nothing leaked, the node still serves.
  CHECK(rt->tiers().global().status().in_use == 0);
  CHECK(exchange(port(), http::verb::get, "/healthz").status == 200);
}

TEST_CASE_METHOD(fixture,
                 "upstream errors pass through; exhaustion is a 503 with "
                 "Retry-After") {
  auto picky = exchange(port(), http::verb::post, "/picky", "{}");
  CHECK(picky.status == 400);
  CHECK(picky.doc()["error"] == "simulated 400");
  auto broken = exchange(port(), http::verb::post, "/broken", "{}");
  CHECK(broken.status == 503);
  CHECK(broken.doc()["error"]["type"] == "all_sources_exhausted");
  CHECK(broken.doc()["error"]["reason"] == "retry_exhausted");
  CHECK(broken.doc()["error"]["attempts"].size() == 1);
  CHECK_FALSE(broken.retry_after.empty());
}

TEST_CASE_METHOD(fixture,
                 "a second call in a full session gets tool_busy naming the "
                 "session tier") {
  reply first;
  std::thread t{[&] {
    first = exchange(port(), http::verb::post, "/slow", "{}", "alice");
  }};
  REQUIRE(eventually([&] { return slow.stats->in_flight == 1; }));
  auto second = exchange(port(), http::verb::post, "/slow", "{}", "alice");
  CHECK(second.status == 503);
  CHECK(second.doc()["error"]["type"] == "tool_busy");
  CHECK(second.doc()["error"]["code"] == -32016);
  CHECK(second.doc()["error"]["tier"] == "session");
  CHECK_FALSE(second.retry_after.empty());
  t.join();
  CHECK(first.status == 200);
}

TEST_CASE_METHOD(fixture, "a client that disconnects mid-call cancels it and "
                          "everything comes back") {
  {
    net::io_context ioc;
    beast::tcp_stream stream{ioc};
    stream.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port()});
    http::request<http::string_body> req{http::verb::post, "/slow", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = "{}";
    req.prepare_payload();
    http::write(stream, req);
    REQUIRE(eventually([&] { return slow.stats->in_flight == 1; }));
    CHECK(rt->tiers().global().status().in_use == 1);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.socket().close(ec);
  }
  CHECK(eventually([&] { return slow.stats->cancelled == 1; }));
  CHECK(eventually([&] {
    return rt->tiers().global().status().in_use == 0 &&
           rt->source("slow").tier->load().in_use == 0 &&
           front->in_flight() == 0;
  }));
  CHECK(slow.stats->in_flight == 0);
}

TEST_CASE_METHOD(fixture, "GET /status reports tiers and sources") {
  auto r = exchange(port(), http::verb::get, "/status");
  REQUIRE(r.status == 200);
  auto doc = r.doc();
  CHECK(doc["tiers"]["global"]["cap"] == 1024);
  CHECK(doc["tiers"]["global"]["in_use"] == 0);
  CHECK(doc["calls_in_flight"] == 0);
  REQUIRE(doc["sources"].size() == 4);
  for (auto& s : doc["sources"]) {
    CHECK(s["breaker"]["state"] == "closed");
    CHECK(s["aimd_limit"] == 16);
    CHECK(s["in_flight"] == 0);
  }
  // A call in flight shows up.
  std::thread t{[&] { exchange(port(), http::verb::post, "/slow", "{}"); }};
  REQUIRE(eventually([&] { return slow.stats->in_flight == 1; }));
  auto busy = exchange(port(), http::verb::get, "/status").doc();
  CHECK(busy["calls_in_flight"] == 1);
  CHECK(busy["tiers"]["global"]["in_use"] == 1);
  t.join();
}

TEST_CASE_METHOD(fixture, "GET /metrics counts calls, verdicts and attempts") {
  exchange(port(), http::verb::post, "/v1/chat/completions", "{}");
  exchange(port(), http::verb::post, "/broken", "{}");
  auto r = exchange(port(), http::verb::get, "/metrics");
  REQUIRE(r.status == 200);
  auto has = [&](const std::string& line) {
    INFO(line);
    CHECK(r.body.find(line) != std::string::npos);
  };
  has("sluice_calls_total{route=\"/v1/chat/completions\",outcome=\"ok\"} 1");
  has("sluice_calls_total{route=\"/broken\",outcome=\"all_sources_exhausted\"} "
      "1");
  has("sluice_verdicts_total{reason=\"retry_exhausted\"} 1");
  has("sluice_attempts_total{source=\"broken\",outcome=\"transient\"} 1");
  has("sluice_call_duration_seconds_count{route=\"/broken\"} 1");
  has("sluice_breaker_state{source=\"fast\"} 0");
  has("# TYPE sluice_calls_total counter");
}

TEST_CASE_METHOD(fixture,
                 "GET /events streams breaker transitions and verdicts") {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  stream.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port()});
  http::request<http::empty_body> req{http::verb::get, "/events", 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(stream, req);
  beast::flat_buffer buf;
  http::response_parser<http::empty_body> header;
  http::read_header(stream, buf, header);
  CHECK(header.get().result_int() == 200);
  CHECK(header.get()[http::field::content_type] == "text/event-stream");
  // Make events until both kinds arrive (the stream registers right after
  // its header is written, so the first triggers may come too early): a
  // verdict, and an operator isolating (and resetting) a breaker.
  std::string seen = beast::buffers_to_string(buf.data());
  auto done = [&] {
    return seen.find("event: verdict") != std::string::npos &&
           seen.find("\"to\":\"open\"") != std::string::npos;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  // Each trigger only until its event is seen: ten failed calls would open
  // the breaker of "broken" and leave the next call waiting for it.
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    if (seen.find("event: verdict") == std::string::npos)
      exchange(port(), http::verb::post, "/broken", "{}");
    if (seen.find("\"to\":\"open\"") == std::string::npos) {
      caf::anon_send(rt->source("fast").breaker.actor, reset_atom_v);
      caf::anon_send(rt->source("fast").breaker.actor, isolate_atom_v);
    }
    std::this_thread::sleep_for(50ms);
    beast::error_code ec;
    while (stream.socket().available(ec) > 0 && !ec) {
      char chunk[4096];
      auto n = stream.socket().read_some(net::buffer(chunk), ec);
      seen.append(chunk, n);
    }
  }
  INFO("the stream so far: " << seen);
  CHECK(seen.find("event: verdict") != std::string::npos);
  CHECK(seen.find("\"reason\":\"retry_exhausted\"") != std::string::npos);
  CHECK(seen.find("event: breaker") != std::string::npos);
  CHECK(seen.find("\"source\":\"fast\"") != std::string::npos);
  CHECK(seen.find("\"to\":\"open\"") != std::string::npos);
}
