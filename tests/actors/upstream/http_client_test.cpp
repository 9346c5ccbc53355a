// The HTTP client on a loop and a simulated time of the test's own (Beast's
// "a client is handed its io_context", Envoy's simulated time): each of an
// exchange's deadlines ends it at exactly its instant, not a nanosecond
// before, and none outlives its exchange. The upstream is real (loopback);
// only the time is simulated, so nothing here sleeps or waits for a
// timeout to pass.

#include "sluice/actors/upstream/http_client.hpp"

#include "sluice/actors/http_source.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include "fakes/raw_upstream.hpp"
#include "fakes/simulated_io_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using sluice::testing::raw_request;
using sluice::testing::raw_response;
using sluice::testing::raw_step;
using sluice::testing::raw_upstream;
using sluice::testing::simulated_io_time;

namespace {

constexpr duration ns{1};

struct client_fixture {
  /// Before the loop, which may destroy exchanges (and their alarms) as it
  /// goes when a test ends early.
  simulated_io_time time;
  const time_point t0 = time.now();
  net::io_context loop;
  net::executor_work_guard<net::io_context::executor_type> work{
      loop.get_executor()};
  std::shared_ptr<http_source_stats> stats =
      std::make_shared<http_source_stats>();
  std::unique_ptr<upstream::http_client> client;
  std::vector<source_reply> replies;

  http_source_config config(const std::string& base_url) {
    http_source_config c;
    c.base_url = base_url;
    c.connect_timeout = 5s;
    c.first_byte_timeout = 120s;
    c.idle_timeout = 60s;
    c.response_timeout = 300s;
    return c;
  }

  void make(const http_source_config& c) {
    validate(c);
    client = std::make_unique<upstream::http_client>(loop, time, c, stats);
  }

  void attempt(uint64_t id, duration timeout = duration::zero()) {
    call_request req{"/v1/chat/completions", "{}"};
    req.timeout = timeout;
    client->start(id, std::move(req), [this](source_reply r) {
      replies.push_back(std::move(r));
    });
  }

  /// Runs the loop's handlers as real I/O completes, until `done` holds;
  /// false after 10 s of real time (a broken test fails, it does not hang).
  template <class Predicate>
  bool run_until(Predicate done) {
    auto limit = steady::now() + 10s;
    while (!done()) {
      if (steady::now() > limit)
        return false;
      loop.run_one_for(5ms);
    }
    return true;
  }

  /// Until the attempt's next deadline is `at`: the client has done what
  /// the upstream's bytes so far asked of it.
  bool deadline_becomes(time_point at) {
    return run_until([&] { return time.next_alarm() == at; });
  }

  /// Lets the loop run what is ready (no I/O is awaited).
  void settle() {
    loop.poll();
  }

  /// Whether the attempt is still unanswered a nanosecond before `at` and
  /// answered at `at` (time is moved there).
  bool answered_exactly_at(time_point at) {
    time.advance(at - ns - time.now());
    settle();
    if (!replies.empty())
      return false;
    time.advance(ns);
    return replies.size() == 1;
  }

  ~client_fixture() {
    client.reset(); // the loop is not running: no handler sees it go
  }
};

// Reads each request and answers nothing, keeping the connection open.
std::vector<raw_step> silent(const raw_request&) {
  return {};
}

} // namespace

TEST_CASE_METHOD(client_fixture,
                 "no first byte - the attempt ends at exactly "
                 "first_byte_timeout after sending") {
  raw_upstream up{silent};
  make(config(up.url()));
  attempt(1);
  REQUIRE(run_until([&] { return up.requests == 1; }));
  REQUIRE(deadline_becomes(t0 + 120s));
  REQUIRE(answered_exactly_at(t0 + 120s));
  CHECK(replies[0].kind == policy::outcome_kind::timeout);
  CHECK(replies[0].body.find("did not answer in time") != std::string::npos);
  CHECK(time.pending() == 0);
}

TEST_CASE_METHOD(client_fixture,
                 "headers alone do not start the idle clock - the body's "
                 "first byte is due first_byte_timeout after sending") {
  raw_upstream up{[](const raw_request&) {
    return std::vector<raw_step>{raw_step::send(
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")};
  }};
  make(config(up.url()));
  attempt(1);
  REQUIRE(run_until([&] { return up.scripts_done == 1; }));
  // Written over loopback, the headers are in the client's socket now: the
  // loop reads them. The deadline stays where sending put it.
  settle();
  REQUIRE(time.next_alarm() == t0 + 120s);
  REQUIRE(answered_exactly_at(t0 + 120s));
  CHECK(replies[0].kind == policy::outcome_kind::timeout);
  CHECK(replies[0].status == 200);
  CHECK(replies[0].body.find("went silent") != std::string::npos);
}

TEST_CASE_METHOD(client_fixture,
                 "a body that stops ends idle_timeout after its last bytes") {
  raw_upstream up{[](const raw_request&) {
    return std::vector<raw_step>{raw_step::send(
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")};
  }};
  make(config(up.url()));
  time.advance(7s); // the request goes at t0 + 7 s
  attempt(1);
  REQUIRE(deadline_becomes(t0 + 7s + 60s)); // "abc" read at t0 + 7 s
  REQUIRE(answered_exactly_at(t0 + 7s + 60s));
  CHECK(replies[0].kind == policy::outcome_kind::timeout);
  CHECK(replies[0].body.find("went silent") != std::string::npos);
}

TEST_CASE_METHOD(client_fixture,
                 "response_timeout bounds the first byte when it is the "
                 "shorter") {
  raw_upstream up{silent};
  auto c = config(up.url());
  c.response_timeout = 100s;
  make(c);
  attempt(1);
  REQUIRE(deadline_becomes(t0 + 100s));
  REQUIRE(answered_exactly_at(t0 + 100s));
  CHECK(replies[0].kind == policy::outcome_kind::timeout);
}

TEST_CASE_METHOD(client_fixture,
                 "the attempt's own limit cuts it short of the source's "
                 "timeouts") {
  raw_upstream up{silent};
  make(config(up.url()));
  attempt(1, std::chrono::duration_cast<duration>(300ms));
  REQUIRE(run_until([&] { return up.requests == 1; }));
  REQUIRE(deadline_becomes(t0 + 300ms));
  REQUIRE(answered_exactly_at(t0 + 300ms));
  CHECK(replies[0].kind == policy::outcome_kind::timeout);
}

TEST_CASE_METHOD(client_fixture,
                 "a TLS handshake that gets no answer ends at exactly "
                 "connect_timeout - a connection failure") {
  // Accepts on the test's own loop, reads the ClientHello and never says a
  // word.
  tcp::acceptor acceptor{loop, {net::ip::make_address("127.0.0.1"), 0}};
  tcp::socket peer{loop};
  char hello[512];
  size_t heard = 0;
  acceptor.async_accept(peer, [&](boost::system::error_code ec) {
    if (!ec)
      peer.async_read_some(net::buffer(hello),
                           [&](boost::system::error_code, size_t n) {
                             heard = n;
                           });
  });
  auto port = acceptor.local_endpoint().port();
  make(config("https://127.0.0.1:" + std::to_string(port)));
  attempt(1);
  // The handshake has begun (the connect's deadline is gone with it).
  REQUIRE(run_until([&] { return heard > 0; }));
  REQUIRE(time.next_alarm() == t0 + 5s);
  REQUIRE(answered_exactly_at(t0 + 5s));
  CHECK(replies[0].kind == policy::outcome_kind::transient);
  CHECK(replies[0].body.find("TLS handshake failed: timed out") !=
        std::string::npos);
  CHECK(stats->tls_handshake_failures == 1);
}

TEST_CASE_METHOD(client_fixture,
                 "an answer in time leaves no deadline behind - its "
                 "pooled connection serves the next attempt") {
  raw_upstream up{[](const raw_request&) {
    return std::vector<raw_step>{raw_step::send(raw_response("200 OK", "{}"))};
  }};
  make(config(up.url()));
  attempt(1);
  REQUIRE(run_until([&] { return replies.size() == 1; }));
  CHECK(replies[0].kind == policy::outcome_kind::ok);
  // Long past every deadline the first attempt had: nothing fires, and the
  // idle connection is still there for the next one.
  time.advance(1h);
  settle();
  CHECK(replies.size() == 1);
  attempt(2);
  REQUIRE(run_until([&] { return replies.size() == 2; }));
  CHECK(replies[1].kind == policy::outcome_kind::ok);
  CHECK(stats->connections_opened == 1);
  CHECK(stats->connections_reused == 1);
}

TEST_CASE_METHOD(client_fixture,
                 "a cancelled attempt's deadline goes with it - and it is "
                 "never answered") {
  raw_upstream up{silent};
  make(config(up.url()));
  attempt(1);
  REQUIRE(deadline_becomes(t0 + 120s));
  client->cancel(1);
  REQUIRE(run_until([&] { return stats->cancelled == 1; }));
  time.advance(1h);
  settle();
  CHECK(replies.empty());
}

TEST_CASE_METHOD(client_fixture,
                 "an attempt cancelled while its host name resolves sends "
                 "nothing") {
  raw_upstream up{[](const raw_request&) {
    return std::vector<raw_step>{raw_step::send(raw_response("200 OK", "{}"))};
  }};
  make(config("http://localhost:" + std::to_string(up.port())));
  attempt(1);
  client->cancel(1); // runs before the lookup's answer comes back
  attempt(2);
  REQUIRE(run_until([&] { return replies.size() == 1; }));
  CHECK(replies[0].kind == policy::outcome_kind::ok);
  // Attempt 1 went nowhere: had it connected after its lookup, its request
  // would be on the wire by the time attempt 2, behind it, was answered.
  CHECK(up.connections == 1);
  CHECK(up.requests == 1);
  CHECK(stats->cancelled == 1);
}

TEST_CASE_METHOD(client_fixture,
                 "with the default pool, 64 calls after 64 calls at once "
                 "open no new connection - the pool keeps what is in use") {
  raw_upstream up{[](const raw_request&) {
    return std::vector<raw_step>{raw_step::send(raw_response("200 OK", "{}"))};
  }};
  http_source_config c; // the shipped defaults
  c.base_url = up.url();
  make(c);
  // Every start is on the loop's queue before any connection completes:
  // each of the 64 finds the pool empty and opens its own.
  for (uint64_t id = 1; id <= 64; ++id)
    attempt(id);
  REQUIRE(run_until([&] { return replies.size() == 64; }));
  REQUIRE(stats->connections_opened == 64);
  for (uint64_t id = 65; id <= 128; ++id)
    attempt(id);
  REQUIRE(run_until([&] { return replies.size() == 128; }));
  for (auto& r : replies)
    CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(stats->connections_opened == 64);
  CHECK(stats->connections_reused == 64);
  CHECK(up.connections == 64);
}

TEST_CASE_METHOD(client_fixture,
                 "started on its loop, an attempt on a pooled connection "
                 "has its request on the wire before the start returns") {
  // The upstream is the test's own socket on the loop: what the client
  // wrote is in its receive queue the moment the write returns (loopback).
  tcp::acceptor acceptor{loop, {net::ip::make_address("127.0.0.1"), 0}};
  tcp::socket peer{loop};
  bool accepted = false;
  acceptor.async_accept(peer, [&](boost::system::error_code ec) {
    accepted = !ec;
  });
  make(config("http://127.0.0.1:" +
              std::to_string(acceptor.local_endpoint().port())));
  auto answer = [&] {
    std::string in;
    net::read_until(peer, net::dynamic_buffer(in), "\r\n\r\n{}");
    net::write(peer,
               net::buffer(std::string{"HTTP/1.1 200 OK\r\n"
                                       "Content-Length: 2\r\n\r\n{}"}));
  };
  // The first attempt from outside the loop: posted, it connects.
  attempt(1);
  REQUIRE(run_until([&] { return accepted && peer.available() > 0; }));
  answer();
  REQUIRE(run_until([&] { return replies.size() == 1; }));
  // The second from a handler of the loop (as a governor on it starts
  // one): the pooled connection carries it at once.
  size_t on_the_wire = 0;
  bool ran = false;
  net::post(loop, [&] {
    attempt(2);
    on_the_wire = peer.available();
    ran = true;
  });
  REQUIRE(run_until([&] { return ran; }));
  CHECK(on_the_wire > 0);
  CHECK(stats->connections_reused == 1);
  REQUIRE(run_until([&] { return peer.available() > 0; }));
  answer();
  REQUIRE(run_until([&] { return replies.size() == 2; }));
  CHECK(replies[1].kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(client_fixture,
                 "each attempt goes to its own route's target, routes "
                 "alternating on one source") {
  std::vector<std::string> targets;
  std::mutex mx;
  raw_upstream up{[&](const raw_request& r) {
    {
      std::lock_guard<std::mutex> guard{mx};
      targets.push_back(r.target);
    }
    return std::vector<raw_step>{raw_step::send(raw_response("200 OK", "{}"))};
  }};
  make(config(up.url() + "/v1"));
  const char* routes[] = {"/v1/chat/completions", "/v1/embeddings",
                          "/v1/chat/completions"};
  uint64_t id = 0;
  for (auto* route : routes) {
    client->start(++id, call_request{route, "{}"},
                  [this](source_reply r) { replies.push_back(std::move(r)); });
    REQUIRE(run_until([&] { return replies.size() == id; }));
  }
  std::lock_guard<std::mutex> guard{mx};
  CHECK(targets == std::vector<std::string>{"/v1/chat/completions",
                                            "/v1/embeddings",
                                            "/v1/chat/completions"});
}
