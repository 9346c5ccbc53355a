// The HTTP source against a small upstream on loopback: status
// classification, Retry-After, keep-alive reuse, headers from the
// environment, and cancellation closing the upstream request.

#include "actors/http_source.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
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

#include "messages/atoms.hpp"
#include "runtime/runtime.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// A blocking upstream: a thread per connection, answers by target.
class test_upstream {
public:
  test_upstream()
      : acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
    accept_thread_ = std::thread{[this] { accept_loop(); }};
  }

  ~test_upstream() {
    stop_ = true;
    // Unblock accept() with one last connection.
    beast::error_code ec;
    net::io_context ioc;
    tcp::socket s{ioc};
    s.connect({net::ip::make_address("127.0.0.1"), port()}, ec);
    accept_thread_.join();
    for (auto& t : connection_threads_)
      t.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  std::atomic<int> connections{0};
  std::atomic<int> requests{0};

private:
  void accept_loop() {
    while (!stop_) {
      beast::error_code ec;
      tcp::socket socket{ioc_};
      acceptor_.accept(socket, ec);
      if (ec || stop_)
        return;
      ++connections;
      connection_threads_.emplace_back(
          [this, s = std::move(socket)]() mutable { serve(std::move(s)); });
    }
  }

  void serve(tcp::socket socket) {
    beast::flat_buffer buf;
    for (;;) {
      http::request<http::string_body> req;
      beast::error_code ec;
      http::read(socket, buf, req, ec);
      if (ec)
        return;
      ++requests;
      http::response<http::string_body> res{http::status::ok, 11};
      res.keep_alive(req.keep_alive());
      std::string target{req.target()};
      if (target == "/api/v1/ok") {
        res.body() = R"({"ok":true})";
      } else if (target == "/api/v1/busy") {
        res.result(429);
        res.set(http::field::retry_after, "7");
      } else if (target == "/api/v1/down") {
        res.result(503);
      } else if (target == "/api/v1/bad") {
        res.result(400);
        res.body() = R"({"error":"bad request"})";
      } else if (target == "/api/v1/auth") {
        res.body() = std::string{req[http::field::authorization]};
      } else if (target == "/api/v1/slow") {
        for (int i = 0; i < 300 && !stop_; ++i)
          std::this_thread::sleep_for(10ms);
      } else {
        res.result(404);
      }
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || !req.keep_alive())
        return;
    }
  }

  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::vector<std::thread> connection_threads_;
};

struct fixture {
  test_upstream upstream;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  http_source src;

  fixture() {
    setenv("SLUICE_TEST_TOKEN", "Bearer s3cret", 1);
    http_source_config c;
    c.base_url = "http://127.0.0.1:" + std::to_string(upstream.port()) + "/api";
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

TEST_CASE("an unreachable upstream is transient; bad settings are refused") {
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
  c.base_url = "https://example.invalid";
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
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (src.stats->in_flight == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(src.stats->in_flight == 1);
  caf::anon_send_exit(requester, caf::exit_reason::kill);
  while (src.stats->cancelled == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  CHECK(src.stats->cancelled == 1);
  CHECK(src.stats->in_flight == 0);
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
