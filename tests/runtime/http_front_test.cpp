// The HTTP front on loopback, against simulated sources on the real
// scheduler: routes, JSON errors with the right statuses, tool_busy with
// Retry-After, and a client disconnect cancelling its call.

#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"

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

#include "loopback_http.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using namespace sluice::testing::loopback;

namespace {

sim_config latency(duration d) {
  sim_config s;
  s.phases[0].latency_min = s.phases[0].latency_max = d;
  return s;
}

struct fixture {
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<runtime> rt;
  std::unique_ptr<http_front> front;
  simulated_source fast, slow, streamy;

  fixture() {
    add_error_category(caf_cfg);
    use_loop_scheduler(caf_cfg, 1); // as sluice-node: on event loops
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
    // Streams: three chunks 200 ms apart, then [DONE] at 800 ms.
    streamy = rt->add_simulated_source("streamy", latency(800ms));
    sim_config breaky = latency(400ms);
    breaky.phases[0].stream_break_rate = 1.0;
    rt->add_simulated_source("breaky", breaky);
    rt->add_route({"/v1/chat/completions", "chat", {"fast"}, {}, {}});
    rt->add_route({"/slow", "chat", {"slow"}, {}, {}});
    rt->add_route({"/broken", "chat", {"broken"}, {}, {}});
    rt->add_route({"/picky", "chat", {"picky"}, {}, {}});
    rt->add_route({"/stream", "chat", {"streamy"}, {}, {}});
    rt->add_route({"/breaks", "chat", {"breaky"}, {}, {}});
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
  // The simulator answers a chat in OpenAI's shape.
  CHECK(r.doc()["object"] == "chat.completion");
  CHECK(r.doc()["choices"][0]["message"]["role"] == "assistant");
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
      {http::verb::post, "/v1/chat/completions", R"({"stream":"yes"})", 400,
       "bad_request", -32600},
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
    // OpenAI's shape: our name as `code`, our number beside it.
    CHECK(doc["error"]["code"] == c.type);
    CHECK(doc["error"]["sluice_code"] == c.code);
    CHECK(doc["error"]["type"] == "invalid_request_error");
    CHECK(doc["error"]["message"].is_string());
  }
  // Nothing leaked, the node still serves.
  CHECK(rt->tiers().global().status().in_use == 0);
  CHECK(exchange(port(), http::verb::get, "/healthz").status == 200);
}

TEST_CASE_METHOD(fixture,
                 "upstream errors pass through - exhaustion is a 503 with "
                 "Retry-After") {
  auto picky = exchange(port(), http::verb::post, "/picky", "{}");
  CHECK(picky.status == 400);
  CHECK(picky.doc()["error"]["message"] == "simulated 400");
  auto broken = exchange(port(), http::verb::post, "/broken", "{}");
  CHECK(broken.status == 503);
  CHECK(broken.doc()["error"]["code"] == "all_sources_exhausted");
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
  CHECK(second.doc()["error"]["code"] == "tool_busy");
  CHECK(second.doc()["error"]["sluice_code"] == -32016);
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
  REQUIRE(doc["sources"].size() == 6);
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
  // Its session (the connection fallback) and its connection, each holding
  // one permit; the /status request's own connection holds none. Sessions
  // are counted by owner, never listed by id.
  auto& sessions = busy["tiers"]["sessions"];
  REQUIRE(sessions.size() == 1);
  CHECK(sessions.begin().key() == "anonymous");
  CHECK(sessions.begin().value()["sessions"] == 1);
  CHECK(sessions.begin().value()["in_use"] == 1);
  auto& connections = busy["tiers"]["connections"];
  CHECK(busy["connections"] == 2);
  REQUIRE(connections.size() == 2);
  int held = 0;
  for (auto& c : connections)
    held += c["in_use"].get<int>();
  CHECK(held == 1);
  t.join();
  // A scope's progress age: seconds since a call in it last succeeded, or
  // null before any did.
  CHECK(doc["scopes"]["/v1/chat/completions"]["progress_age_s"].is_null());
  exchange(port(), http::verb::post, "/v1/chat/completions", "{}");
  auto after = exchange(port(), http::verb::get, "/status").doc();
  auto age = after["scopes"]["/v1/chat/completions"]["progress_age_s"];
  REQUIRE(age.is_number());
  CHECK(age.get<double>() >= 0.0);
  CHECK(age.get<double>() < 5.0);
  CHECK(after["tiers"]["sessions"].empty()); // no call in flight
  // The dashboard's figures: attempts by outcome per source, the overhead
  // histogram, each route's slowest calls with their stall accounts.
  CHECK(after["now_ms"].get<int64_t>() > 1700000000000);
  auto& overhead = after["calls"]["overhead"];
  CHECK(overhead["count"].get<int>() >= 2);
  CHECK(overhead["bounds_s"].size() == overhead["buckets"].size());
  auto& slowest = after["calls"]["slowest"]["/v1/chat/completions"];
  REQUIRE(slowest.size() == 1);
  CHECK(slowest[0]["status"] == "ok");
  CHECK(slowest[0]["attempts"] == 1);
  CHECK(slowest[0]["elapsed_ms"].get<double>() >=
        slowest[0]["productive_ms"].get<double>());
  CHECK(slowest[0]["stalled_ms"].get<double>() >= 0.0);
  int ok_attempts = 0;
  for (auto& s : after["sources"])
    if (s["attempts_by_outcome"].contains("ok"))
      ok_attempts += s["attempts_by_outcome"]["ok"].get<int>();
  CHECK(ok_attempts >= 2);
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
  // Both calls made attempts: both are in the overhead histogram.
  has("# TYPE sluice_gateway_overhead_seconds histogram");
  has("sluice_gateway_overhead_seconds_count 2");
  has("sluice_gateway_overhead_seconds_bucket{le=\"+Inf\"} 2");
  // The process.
  has("# TYPE process_resident_memory_bytes gauge");
  has("process_open_fds ");
  has("process_threads ");
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
  // A verdict says how the call went: attempts, time, the stall clock's
  // charge, the key (none here) and the model (none sent).
  CHECK(seen.find("\"attempts\":") != std::string::npos);
  CHECK(seen.find("\"stalled_ms\":") != std::string::npos);
  CHECK(seen.find("\"key\":null") != std::string::npos);
  // A stream opened later replays the transitions in its snapshot.
  beast::tcp_stream late{ioc};
  late.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port()});
  http::write(late, req);
  beast::flat_buffer late_buf;
  http::response_parser<http::empty_body> late_header;
  http::read_header(late, late_buf, late_header);
  REQUIRE(late_header.get().result_int() == 200);
  std::string snapshot = beast::buffers_to_string(late_buf.data());
  while (snapshot.find("}\n\n") == std::string::npos) {
    char chunk[4096];
    auto n = late.socket().read_some(net::buffer(chunk));
    snapshot.append(chunk, n);
  }
  INFO("the snapshot: " << snapshot);
  // (The body is chunked: the event sits after its chunk's size line.)
  auto data = snapshot.find("event: snapshot\ndata: {\"breakers\":[");
  REQUIRE(data != std::string::npos);
  data += 22;
  auto history = snapshot.find("\"history\":[{", data);
  REQUIRE(history != std::string::npos);
  CHECK(snapshot.find("\"to\":\"open\"", history) != std::string::npos);
  CHECK(nlohmann::json::accept(
      snapshot.substr(data, snapshot.find("\n\n", data) - data)));
}

TEST_CASE_METHOD(fixture, "a streamed call is passed through as server-sent "
                          "events as they arrive") {
  stream_client c{port()};
  c.send(http::verb::post, "/stream", R"({"stream":true,"messages":[]})");
  REQUIRE(c.read_until("0\r\n\r\n"));
  CHECK(c.all.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(c.all.find("Content-Type: text/event-stream") != std::string::npos);
  CHECK(c.all.find("Transfer-Encoding: chunked") != std::string::npos);
  // OpenAI's chunks: the role first, the finish_reason last, then [DONE].
  CHECK(c.all.find("\"role\":\"assistant\"") <
        c.all.find("\"finish_reason\":\"stop\""));
  CHECK(c.all.find("\"finish_reason\":\"stop\"") < c.all.find("data: [DONE]"));
  CHECK(c.all.find("data: [DONE]") != std::string::npos);
  // Incremental: the first chunk came well before [DONE], not with it.
  auto first = c.arrival("\"role\":\"assistant\"");
  auto done = c.arrival("data: [DONE]");
  CHECK(done - first > 300ms);
  // The connection stays usable after the stream.
  c.all.clear();
  c.pieces.clear();
  c.send(http::verb::get, "/healthz");
  REQUIRE(c.read_until("}"));
  CHECK(c.all.find("\"status\":\"ok\"") != std::string::npos);
  // The verdict and metrics count it as a success.
  auto m = exchange(port(), http::verb::get, "/metrics");
  CHECK(m.body.find("sluice_calls_total{route=\"/stream\",outcome=\"ok\"} 1") !=
        std::string::npos);
}

TEST_CASE_METHOD(fixture, "a stream that breaks off ends with an error event") {
  stream_client c{port()};
  c.send(http::verb::post, "/breaks", R"({"stream":true})");
  REQUIRE(c.read_until("0\r\n\r\n"));
  CHECK(c.all.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  auto chunk = c.all.find("simulated chunk 0");
  auto error = c.all.find("event: error");
  CHECK(chunk != std::string::npos);
  REQUIRE(error != std::string::npos);
  CHECK(chunk < error);
  CHECK(c.all.find("\"reason\":\"stream_interrupted\"") != std::string::npos);
  CHECK(c.all.find("\"source\":\"breaky\"") != std::string::npos);
  CHECK(c.all.find("data: [DONE]") == std::string::npos);
  CHECK(eventually([&] { return front->in_flight() == 0; }));
}

TEST_CASE_METHOD(fixture, "a client leaving mid-stream cancels the call") {
  {
    stream_client c{port()};
    c.send(http::verb::post, "/stream", R"({"stream":true})");
    REQUIRE(c.read_until("simulated chunk 0"));
    CHECK(streamy.stats->in_flight == 1);
    beast::error_code ec;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    c.stream.socket().close(ec);
  }
  CHECK(eventually([&] { return streamy.stats->cancelled == 1; }));
  CHECK(eventually([&] {
    return rt->tiers().global().status().in_use == 0 &&
           rt->source("streamy").tier->load().in_use == 0 &&
           front->in_flight() == 0;
  }));
  CHECK(streamy.stats->ok == 1); // it would have succeeded
  CHECK(streamy.stats->in_flight == 0);
}
