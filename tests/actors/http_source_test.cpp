// The HTTP source against a small upstream on loopback: status
// classification, Retry-After, keep-alive reuse, headers from the
// environment and from the call, the upstream target, and cancellation
// closing the upstream request.

#include "sluice/actors/http_source.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "fakes/raw_upstream.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_upstream.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using sluice::testing::raw_request;
using sluice::testing::raw_response;
using sluice::testing::raw_step;
using sluice::testing::raw_upstream;
using sluice::testing::test_upstream;

namespace {

struct fixture {
  test_upstream upstream;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  http_source src;

  fixture() {
    setenv("SLUICE_TEST_TOKEN", "Bearer s3cret", 1);
    http_source_config c;
    c.base_url = upstream.url("/api");
    c.headers = {{"Authorization", "env:SLUICE_TEST_TOKEN"}};
    c.response_timeout = 1s;
    src = spawn_http_source(sys, c);
  }

  source_reply attempt(const std::string& route) {
    caf::scoped_actor self{sys};
    source_reply out;
    self->request(src.actor, 10s, attempt_atom_v, call_request{route, "{}"})
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) { FAIL("no reply"); });
    return out;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "HTTP answers are classified with their status") {
  auto ok = attempt("/v1/ok");
  CHECK(ok.kind == policy::outcome_kind::ok);
  CHECK(ok.status == 200);
  CHECK(ok.body == R"({"ok":true})");
  auto busy = attempt("/v1/busy");
  CHECK(busy.kind == policy::outcome_kind::rate_limited);
  CHECK(busy.retry_after == std::chrono::duration_cast<duration>(7s));
  CHECK(attempt("/v1/down").kind == policy::outcome_kind::transient);
  auto bad = attempt("/v1/bad");
  CHECK(bad.kind == policy::outcome_kind::permanent);
  CHECK(bad.status == 400);
  CHECK(bad.body == R"({"error":"bad request"})");
  CHECK(bad.content_type == "application/json");
  auto teapot = attempt("/v1/teapot");
  CHECK(teapot.kind == policy::outcome_kind::permanent);
  CHECK(teapot.status == 418);
  CHECK(teapot.content_type == "text/plain"); // the front passes it on
}

TEST_CASE_METHOD(fixture, "keep-alive connections are reused") {
  for (int i = 0; i < 5; ++i)
    CHECK(attempt("/v1/ok").kind == policy::outcome_kind::ok);
  CHECK(src.stats->connections_opened == 1);
  CHECK(src.stats->connections_reused == 4);
  CHECK(upstream.connections == 1);
}

TEST_CASE_METHOD(fixture, "headers can come from the environment") {
  auto r = attempt("/v1/auth");
  CHECK(r.body == "Bearer s3cret");
}

TEST_CASE_METHOD(fixture, "a silent upstream is a timeout") {
  auto r = attempt("/v1/slow"); // the response timeout is 1 s
  CHECK(r.kind == policy::outcome_kind::timeout);
}

TEST_CASE("an unreachable upstream is transient - bad settings are refused") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  http_source_config c;
  c.base_url = "http://127.0.0.1:1"; // nothing listens on port 1
  auto src = spawn_http_source(sys, c);
  caf::scoped_actor self{sys};
  self->request(src.actor, 10s, attempt_atom_v, call_request{"/x", "{}"})
      .receive(
          [](const source_reply& r) {
            CHECK(r.kind == policy::outcome_kind::transient);
          },
          [](caf::error&) { FAIL("no reply"); });
  c.base_url = "ftp://example.invalid";
  CHECK_THROWS_WITH(spawn_http_source(sys, c), Catch::StartsWith("base_url:"));
  c.base_url = "http://127.0.0.1:8080";
  c.headers = {{"Authorization", "env:SLUICE_SURELY_UNSET_VARIABLE"}};
  CHECK_THROWS_WITH(spawn_http_source(sys, c),
                    Catch::StartsWith("headers.Authorization:"));
}

TEST_CASE_METHOD(fixture,
                 "a requester that terminates closes its upstream request") {
  auto requester = sys.spawn([this](caf::event_based_actor* self) {
    self->request(src.actor, caf::infinite, attempt_atom_v,
                  call_request{"/v1/slow", "{}"})
        .then([](const source_reply&) {}, [](caf::error&) {});
  });
  auto deadline = std::chrono::steady_clock::now() + 10s;
  // The upstream has the request (and is working on it) ...
  while ((src.stats->in_flight == 0 || upstream.requests == 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(src.stats->in_flight == 1);
  REQUIRE(upstream.requests == 1);
  // ... when the requester goes away.
  caf::anon_send_exit(requester, caf::exit_reason::kill);
  while (src.stats->cancelled == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(src.stats->cancelled == 1);
  CHECK(src.stats->in_flight == 0);
  // The upstream saw its request closed, not left to run.
  while (upstream.closed_by_client == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(upstream.closed_by_client == 1);
}

TEST_CASE_METHOD(fixture, "an attempt's own limit cuts it short - the "
                          "source's timeouts are only the outer bound") {
  http_source_config c;
  c.base_url = upstream.url("/api");
  c.first_byte_timeout = 30s;
  c.response_timeout = 30s;
  auto patient = spawn_http_source(sys, c);
  caf::scoped_actor self{sys};
  call_request req{"/v1/slow", "{}"};
  req.timeout = std::chrono::duration_cast<duration>(300ms);
  auto t0 = std::chrono::steady_clock::now();
  self->request(patient.actor, 20s, attempt_atom_v, req)
      .receive(
          [](const source_reply& r) {
            CHECK(r.kind == policy::outcome_kind::timeout);
          },
          [](caf::error&) { FAIL("no reply"); });
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 300ms);
  CHECK(took < 10s); // the attempt's 0.3 s, not the source's 30 s
  CHECK(patient.stats->in_flight == 0);
}

TEST_CASE_METHOD(fixture,
                 "cancel_atom from a live requester closes its upstream "
                 "request") {
  http_source_config c;
  c.base_url = upstream.url("/api");
  c.first_byte_timeout = 30s; // only the cancel can end it in time
  c.response_timeout = 30s;
  auto patient = spawn_http_source(sys, c);
  auto requester = sys.spawn([patient](caf::event_based_actor* self) {
    self->request(patient.actor, caf::infinite, attempt_atom_v,
                  call_request{"/v1/slow", "{}"})
        .then([](const source_reply&) {}, [](caf::error&) {});
    auto target = caf::actor_cast<caf::actor>(patient.actor);
    return caf::behavior{
        [self, target](cancel_atom) { self->send(target, cancel_atom_v); },
    };
  });
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((patient.stats->in_flight == 0 || upstream.requests == 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(upstream.requests == 1);
  caf::anon_send(requester, cancel_atom_v);
  while ((patient.stats->cancelled == 0 || upstream.closed_by_client == 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(patient.stats->cancelled == 1);
  CHECK(patient.stats->in_flight == 0);
  CHECK(upstream.closed_by_client == 1);
  caf::anon_send_exit(requester, caf::exit_reason::kill);
}

namespace {

// What a streamed attempt produced: its chunks (with arrival times) and
// its reply.
struct stream_record {
  std::mutex mx;
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>>
    chunks;
  std::string text() {
    std::lock_guard<std::mutex> guard{mx};
    std::string all;
    for (auto& c : chunks)
      all += c.second;
    return all;
  }
};

caf::behavior chunk_collector(caf::event_based_actor*,
                              std::shared_ptr<stream_record> rec) {
  return {
      [rec](stream_chunk_atom, uint64_t tag, std::string& bytes) {
        CHECK(tag == 42);
        std::lock_guard<std::mutex> guard{rec->mx};
        rec->chunks.emplace_back(std::chrono::steady_clock::now(),
                                 std::move(bytes));
      },
      // A ping: answered after every chunk sent before it was handled.
      [](status_atom) { return true; },
  };
}

} // namespace

TEST_CASE_METHOD(fixture, "a streamed 2xx answer is passed on as it arrives") {
  auto rec = std::make_shared<stream_record>();
  auto collector = sys.spawn(chunk_collector, rec);
  auto streamed = [&](const std::string& route) {
    call_request req{route, R"({"stream":true})"};
    req.stream = true;
    req.stream_to = collector;
    req.stream_tag = 42;
    caf::scoped_actor self{sys};
    source_reply out;
    self->request(src.actor, 10s, attempt_atom_v, req)
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) { FAIL("no reply"); });
    auto replied = std::chrono::steady_clock::now();
    // The chunks were sent before the reply; the collector has them once it
    // answers a ping sent now.
    self->request(collector, 10s, status_atom_v)
        .receive([](bool) {}, [&](caf::error&) { FAIL("no collector"); });
    return std::make_pair(out, replied);
  };
  SECTION("a whole stream: chunks first, then an empty ok reply") {
    auto [r, replied] = streamed("/v1/stream");
    CHECK(r.kind == policy::outcome_kind::ok);
    CHECK(r.status == 200);
    CHECK(r.body.empty());
    auto text = rec->text();
    CHECK(text.find("part 0") < text.find("part 2"));
    CHECK(text.find("data: [DONE]") != std::string::npos);
    std::lock_guard<std::mutex> guard{rec->mx};
    REQUIRE(rec->chunks.size() >= 2);
    // The upstream spaces its 4 events 150 ms apart: the first chunk came
    // well before the end, not all at once.
    CHECK(replied - rec->chunks.front().first > 200ms);
  }
  SECTION("an upstream closing mid-body: a transient failure after the "
          "chunk it sent") {
    auto [r, replied] = streamed("/v1/cut");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.status == 200);
    CHECK(rec->text().find("part 0") != std::string::npos);
    CHECK(upstream.connections == 1); // no retry on a fresh connection
  }
  SECTION("a stream gone silent: the idle timeout ends it") {
    // The fixture's response timeout is 1 s; the stall lasts 3 s.
    auto [r, replied] = streamed("/v1/stall");
    CHECK(r.kind == policy::outcome_kind::timeout);
    CHECK(rec->text().find("part 0") != std::string::npos);
  }
  SECTION("an error answer to a streamed call is read whole, not streamed") {
    auto [r, replied] = streamed("/v1/bad");
    CHECK(r.kind == policy::outcome_kind::permanent);
    CHECK(r.body == R"({"error":"bad request"})");
    CHECK(rec->text().empty());
  }
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

TEST_CASE("the idle timeout is separate from the total - gaps shorter than "
          "it do not cut a stream") {
  test_upstream upstream;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  http_source_config c;
  c.base_url = upstream.url();
  c.response_timeout = 30s;
  auto attempt = [&](const std::string& route) {
    auto src = spawn_http_source(sys, c);
    caf::scoped_actor self{sys};
    source_reply out;
    auto started = std::chrono::steady_clock::now();
    self->request(src.actor, 20s, attempt_atom_v, call_request{route, "{}"})
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) { FAIL("no reply"); });
    caf::anon_send_exit(src.actor, caf::exit_reason::user_shutdown);
    return std::make_pair(out, std::chrono::steady_clock::now() - started);
  };
  // Each timeout at its exact instant, in simulated time: http_client_test.
  SECTION("a body that stops for longer than idle_timeout") {
    c.idle_timeout = 200ms;
    auto [r, took] = attempt("/stall");
    CHECK(r.kind == policy::outcome_kind::timeout);
    CHECK(took < 2500ms); // not the 3 s the upstream stalls, nor 30 s
  }
  SECTION("a stream with short gaps is not cut by them") {
    c.idle_timeout = 1s; // the gaps are 150 ms
    auto [r, took] = attempt("/stream");
    CHECK(r.kind == policy::outcome_kind::ok);
    CHECK(r.body.find("data: [DONE]") != std::string::npos);
  }
  SECTION("nonsense timeouts are refused, naming the field") {
    c.first_byte_timeout = duration::zero();
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("first_byte_timeout:"));
    c.first_byte_timeout = 1s;
    c.idle_timeout = -1s;
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("idle_timeout:"));
  }
}

TEST_CASE_METHOD(fixture,
                 "governed calls through the runtime reach the HTTP upstream") {
  runtime_config rc;
  rc.kinds["chat"].max_attempts = 2;
  rc.kinds["chat"].backoff = {10ms, 50ms, 0.0};
  runtime rt{sys, rc};
  rt.add_source("upstream", src.actor);
  rt.add_route({"/v1/ok", "chat", {"upstream"}, {}, {}});
  rt.add_route({"/v1/down", "chat", {"upstream"}, {}, {}});
  auto ok = rt.call(call_request{"/v1/ok", "{}"}).get();
  CHECK(ok.ok());
  CHECK(ok.body == R"({"ok":true})");
  auto down = rt.call(call_request{"/v1/down", "{}"}).get();
  CHECK(down.status == call_status::all_sources_exhausted);
  CHECK(down.reason == "retry_exhausted");
  REQUIRE(down.attempts.size() == 2);
  CHECK(down.attempts[0].status == 503);
}

// -- the upstream target -----------------------------------------------------

TEST_CASE("upstream_target writes the segments base path and route share "
          "once") {
  CHECK(upstream_target("", "/v1/chat/completions") == "/v1/chat/completions");
  CHECK(upstream_target("/v1", "/v1/chat/completions") ==
        "/v1/chat/completions");
  CHECK(upstream_target("/openai/v1", "/v1/embeddings") ==
        "/openai/v1/embeddings");
  CHECK(upstream_target("/api", "/v1/x") == "/api/v1/x");
  // Whole segments only.
  CHECK(upstream_target("/v1", "/v10/x") == "/v1/v10/x");
  CHECK(upstream_target("/xv1", "/v1/x") == "/xv1/v1/x");
  // Several segments, the longest overlap first.
  CHECK(upstream_target("/a/v1/beta", "/v1/beta/x") == "/a/v1/beta/x");
  CHECK(upstream_target("/a/b/a", "/a/b/a/x") == "/a/b/a/x");
  // The route keeps a segment of its own.
  CHECK(upstream_target("/v1", "/v1") == "/v1/v1");
  CHECK(upstream_target("/v1", "/v1/") == "/v1/");
  CHECK(upstream_target("/v1", "") == "/v1");
}

TEST_CASE("a base_url ending in /v1 is not doubled on a /v1 route") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
    return {raw_step::send(raw_response("200 OK", r.target))};
  }};
  http_source_config c;
  c.base_url = upstream.url("/v1/");
  auto src = spawn_http_source(sys, c);
  caf::scoped_actor self{sys};
  for (auto [route, target] :
       {std::pair{"/v1/chat/completions", "/v1/chat/completions"},
        std::pair{"/v2/x", "/v1/v2/x"}})
    self->request(src.actor, 10s, attempt_atom_v, call_request{route, "{}"})
        .receive(
            [target = target](const source_reply& r) {
              CHECK(r.kind == policy::outcome_kind::ok);
              CHECK(r.body == target);
            },
            [](caf::error&) { FAIL("no reply"); });
}

// -- headers from the call ---------------------------------------------------

TEST_CASE("a call's headers reach the upstream - the source's own are kept") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::mutex mx;
  std::vector<raw_request> seen;
  raw_upstream upstream{[&](const raw_request& r) -> std::vector<raw_step> {
    std::lock_guard<std::mutex> guard{mx};
    seen.push_back(r);
    return {raw_step::send(raw_response("200 OK", "{}"))};
  }};
  http_source_config c;
  c.base_url = upstream.url();
  c.headers = {{"Authorization", "Bearer gateway"}, {"X-Team", "ops"}};
  auto src = spawn_http_source(sys, c);
  call_request req{"/v1/x", R"({"a":1})"};
  req.headers = {
      {"X-Request-Id", "req-42"},
      {"traceparent",
       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
      {"tracestate", "a=1"},
      {"tracestate", "b=2"},
      {"Host", "evil.example"},
      {"authorization", "Bearer caller"},
      {"Content-Length", "0"},
      {"content-type", "text/plain"},
      {"Transfer-Encoding", "chunked"},
      {"Connection", "close"},
      {"x-team", "caller"},
      {"X-Bad", "a\r\nX-Injected: 1"},
  };
  caf::scoped_actor self{sys};
  self->request(src.actor, 10s, attempt_atom_v, req)
      .receive(
          [](const source_reply& r) {
            CHECK(r.kind == policy::outcome_kind::ok);
          },
          [](caf::error&) { FAIL("no reply"); });
  std::lock_guard<std::mutex> guard{mx};
  REQUIRE(seen.size() == 1);
  auto& got = seen[0];
  auto values = [&](const std::string& name) {
    std::vector<std::string> out;
    for (auto& [n, v] : got.headers)
      if (boost::beast::iequals(n, name))
        out.push_back(v);
    return out;
  };
  using list = std::vector<std::string>;
  CHECK(values("X-Request-Id") == list{"req-42"});
  CHECK(values("traceparent") ==
        list{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
  CHECK(values("tracestate") == list{"a=1", "b=2"});
  // The `Host` entry is not sent: the source's own Host is the only one.
  CHECK(values("Host") == list{"127.0.0.1:" + std::to_string(upstream.port())});
  CHECK(values("Authorization") == list{"Bearer gateway"});
  CHECK(values("Content-Type") == list{"application/json"});
  CHECK(values("Content-Length") == list{"7"});
  CHECK(values("Transfer-Encoding").empty());
  CHECK(values("Connection").size() <= 1);
  CHECK(values("Connection") != list{"close"});
  CHECK(values("X-Team") == list{"ops"});
  CHECK(values("X-Bad").empty());
  CHECK(values("X-Injected").empty());
  CHECK(got.body == R"({"a":1})");
}
