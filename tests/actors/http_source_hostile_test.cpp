// The HTTP source against upstreams that break the rules (SPEC §7): each
// request must get exactly its own answer, every body read has a limit, the
// gateway's credentials never leak through an upstream's 401, the Host
// header and base_url are right, and running out of file descriptors at a
// source's first call fails that call, never the process.

#include "sluice/actors/http_source.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "fakes/raw_upstream.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::raw_request;
using sluice::testing::raw_response;
using sluice::testing::raw_script;
using sluice::testing::raw_step;
using sluice::testing::raw_upstream;

namespace {

/// Bytes the big bodies below are made of: far over every limit.
constexpr uint64_t huge_body_bytes = 50 * 1024 * 1024;

struct hostile_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  http_source spawn(const std::string& base_url,
                    void (*tune)(http_source_config&) = nullptr) {
    http_source_config c;
    c.base_url = base_url;
    c.response_timeout = 5s;
    c.idle_timeout = 2s;
    if (tune)
      tune(c);
    return spawn_http_source(sys, c);
  }

  source_reply attempt(const http_source& src, const std::string& payload,
                       const std::string& route = "/v1/x") {
    caf::scoped_actor self{sys};
    source_reply out;
    out.status = -1;
    self->request(src.actor, 20s, attempt_atom_v, call_request{route, payload})
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) { FAIL("no reply"); });
    return out;
  }
};

// A tagged request's case number: the digit after its last space.
int case_of(const std::string& body) {
  return body.back() - '0';
}

} // namespace

// -- one answer per request --------------------------------------------------

TEST_CASE_METHOD(hostile_fixture,
                 "every request gets its own answer from a misbehaving "
                 "upstream (1xx, stale and extra answers, wrong lengths)") {
  // The upstream echoes each request's tag as its answer, misbehaving in
  // the way the tag's case number says.
  raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
    const auto& tag = r.body;
    auto ok = raw_response("200 OK", tag);
    switch (case_of(tag)) {
    default: // a well-behaved answer
      return {raw_step::send(ok)};
    case 1: // 100 Continue, the answer a little later
      return {raw_step::send("HTTP/1.1 100 Continue\r\n\r\n"),
              raw_step::sleep(30ms), raw_step::send(ok)};
    case 2: // 103 Early Hints and the answer in one segment
      return {raw_step::send("HTTP/1.1 103 Early Hints\r\n"
                             "Link: </style.css>; rel=preload\r\n\r\n" +
                             ok)};
    case 3: // a stale second answer once the first is read
      return {raw_step::send(ok), raw_step::sleep(20ms),
              raw_step::send(raw_response("200 OK", "stale " + tag))};
    case 4: // extra bytes right behind the body
      return {raw_step::send(ok + raw_response("200 OK", "extra " + tag))};
    case 5: // a Content-Length longer than the body, then a close
      return {raw_step::send("HTTP/1.1 200 OK\r\nContent-Length: " +
                             std::to_string(tag.size() + 10) + "\r\n\r\n" +
                             tag),
              raw_step::hang_up()};
    case 6: // a Content-Length shorter than the body
      return {raw_step::send("HTTP/1.1 200 OK\r\nContent-Length: " +
                             std::to_string(tag.size() - 3) + "\r\n\r\n" +
                             tag)};
    case 7: // 101 Switching Protocols: nobody asked
      return {raw_step::send("HTTP/1.1 101 Switching Protocols\r\n"
                             "Upgrade: h2c\r\nConnection: Upgrade\r\n\r\n"),
              raw_step::send(ok)};
    }
  }};
  auto src = spawn(upstream.url());
  const char* senders[] = {"alice", "bob", "carol", "dave"};
  constexpr int calls = 400;
  int own = 0, failed = 0, stale_cases = 0;
  for (int i = 0; i < calls; ++i) {
    // Cases in a mixed order, so each follows each on one connection.
    int c = (i * 5 + i / 8) % 8;
    stale_cases += c == 3;
    auto tag = std::string{senders[i % 4]} + "-" + std::to_string(i) + " " +
               std::to_string(c);
    auto r = attempt(src, tag);
    INFO("call " << i << " case " << c << " got " << r.status << " " << r.body);
    switch (c) {
    case 5:
    case 7:
      CHECK(r.kind == policy::outcome_kind::transient);
      ++failed;
      break;
    case 6:
      CHECK(r.kind == policy::outcome_kind::ok);
      CHECK(r.body == tag.substr(0, tag.size() - 3));
      break;
    default:
      CHECK(r.kind == policy::outcome_kind::ok);
      CHECK(r.status == 200);
      CHECK(r.body == tag);
      own += r.body == tag;
    }
    // Whatever the upstream still had to say about this request is said
    // before the next is sent: a stale answer sits on the pooled
    // connection, where the check before reuse must find it.
    REQUIRE(upstream.wait_idle());
  }
  CHECK(own == calls * 5 / 8);
  CHECK(failed == calls * 2 / 8);
  // Every stale answer was found on its pooled connection before reuse.
  CHECK(src.stats->pool_discards >= static_cast<uint64_t>(stale_cases));
  CHECK(src.stats->framing_errors >= static_cast<uint64_t>(failed));
  CHECK(src.stats->connections_reused > 0); // the pool still works
}

TEST_CASE_METHOD(hostile_fixture, "a 100 Continue 0.3 s before the answer is "
                                  "skipped, four callers in turn") {
  raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
    return {raw_step::send("HTTP/1.1 100 Continue\r\n\r\n"),
            raw_step::sleep(300ms),
            raw_step::send(raw_response("200 OK", r.body))};
  }};
  auto src = spawn(upstream.url());
  for (auto who : {"alice", "bob", "carol", "dave"}) {
    auto r = attempt(src, who);
    CHECK(r.kind == policy::outcome_kind::ok);
    CHECK(r.body == who);
  }
  CHECK(src.stats->connections_opened == 1);
}

TEST_CASE_METHOD(hostile_fixture,
                 "a pooled connection the upstream closed is not reused") {
  raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
    return {raw_step::send(raw_response("200 OK", r.body)),
            raw_step::hang_up()};
  }};
  auto src = spawn(upstream.url());
  for (auto who : {"alice", "bob", "carol"}) {
    CHECK(attempt(src, who).body == who);
    REQUIRE(upstream.wait_idle());
  }
  CHECK(src.stats->pool_discards == 2);
  CHECK(src.stats->connections_reused == 0);
  CHECK(upstream.connections == 3);
}

// -- body limits -------------------------------------------------------------

TEST_CASE_METHOD(hostile_fixture, "a huge error body is cut and the read "
                                  "stops early, streamed call or not") {
  SECTION("500 with a 50 MB Content-Length to a streamed call") {
    raw_upstream upstream{[](const raw_request&) -> std::vector<raw_step> {
      return {raw_step::send("HTTP/1.1 500 Internal Server Error\r\n"
                             "Content-Length: " +
                             std::to_string(huge_body_bytes) + "\r\n\r\n"),
              raw_step::filler(huge_body_bytes)};
    }};
    auto src = spawn(upstream.url());
    auto sink = sys.spawn([](caf::event_based_actor*) -> caf::behavior {
      return {[](stream_chunk_atom, uint64_t, std::string&) {
        FAIL("an error body was streamed");
      }};
    });
    call_request req{"/v1/x", R"({"stream":true})"};
    req.stream = true;
    req.stream_to = sink;
    caf::scoped_actor self{sys};
    source_reply r;
    self->request(src.actor, 20s, attempt_atom_v, req)
        .receive([&](source_reply& x) { r = std::move(x); },
                 [&](caf::error&) { FAIL("no reply"); });
    CHECK(r.status == 500);
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.size() < 200);
    CHECK(r.body.find("limit") != std::string::npos);
    REQUIRE(upstream.wait_idle());
    // The upstream's writes failed once the source closed: what the socket
    // buffers took, not the 50 MB.
    CHECK(upstream.bytes_written < huge_body_bytes / 4);
    CHECK(src.stats->oversized_bodies == 1);
    caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  }
  SECTION("500 chunked without end to a unary call") {
    raw_upstream upstream{[](const raw_request&) -> std::vector<raw_step> {
      return {raw_step::send("HTTP/1.1 500 Internal Server Error\r\n"
                             "Transfer-Encoding: chunked\r\n\r\n"),
              raw_step::chunked_filler(huge_body_bytes)};
    }};
    auto src = spawn(upstream.url());
    auto r = attempt(src, "{}");
    CHECK(r.status == 500);
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.size() < 200);
    REQUIRE(upstream.wait_idle());
    CHECK(upstream.bytes_written < huge_body_bytes / 4);
  }
  SECTION("a 4xx over the limit keeps its class; a small one passes") {
    raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
      if (r.body == "big")
        return {raw_step::send("HTTP/1.1 400 Bad Request\r\n"
                               "Content-Length: 2097152\r\n\r\n"),
                raw_step::filler(2097152)};
      return {raw_step::send(
          raw_response("404 Not Found", R"({"error":"no such model"})"))};
    }};
    auto src = spawn(upstream.url());
    auto big = attempt(src, "big");
    CHECK(big.status == 400);
    CHECK(big.kind == policy::outcome_kind::permanent);
    CHECK(big.body.size() < 200);
    auto small = attempt(src, "small");
    CHECK(small.status == 404);
    CHECK(small.kind == policy::outcome_kind::permanent);
    CHECK(small.body == R"({"error":"no such model"})");
  }
  SECTION("a 2xx over max_body_bytes is transient and its connection "
          "closed") {
    raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
      if (r.body == "big")
        return {raw_step::send("HTTP/1.1 200 OK\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n"),
                raw_step::chunked_filler(5 * 1024 * 1024)};
      return {raw_step::send(raw_response("200 OK", r.body))};
    }};
    auto src = spawn(upstream.url(), [](http_source_config& c) {
      c.max_body_bytes = 1024 * 1024;
    });
    auto big = attempt(src, "big");
    CHECK(big.kind == policy::outcome_kind::transient);
    CHECK(big.body.size() < 200);
    CHECK(attempt(src, "next").body == "next");
    CHECK(src.stats->connections_opened == 2); // the first was not pooled
  }
}

// -- the gateway's credentials -----------------------------------------------

TEST_CASE_METHOD(hostile_fixture, "an upstream 401/403/407 is a generic 502, "
                                  "its body never passed on") {
  raw_upstream upstream{[](const raw_request& r) -> std::vector<raw_step> {
    return {raw_step::send(raw_response(
        r.body + " Refused",
        R"({"error":{"message":"Incorrect API key provided: sk-live-SECRET"}})"))};
  }};
  auto src = spawn(upstream.url());
  for (auto status : {"401", "403", "407"}) {
    auto r = attempt(src, status);
    CHECK(r.kind == policy::outcome_kind::permanent);
    CHECK(r.status == 502);
    CHECK(r.body == std::string{R"({"error":{"type":"upstream_auth_error",)"
                                R"("message":"the upstream refused the )"
                                R"(gateway's credentials (HTTP )"} +
                        status + ")\"}}");
    CHECK(r.body.find("sk-") == std::string::npos);
  }
}

// -- Host header, base_url ---------------------------------------------------

TEST_CASE_METHOD(hostile_fixture, "the Host header names a non-default port") {
  std::mutex mx;
  std::vector<std::string> hosts;
  raw_upstream upstream{[&](const raw_request& r) -> std::vector<raw_step> {
    std::lock_guard<std::mutex> guard{mx};
    hosts.push_back(r.host);
    return {raw_step::send(raw_response("200 OK", r.target))};
  }};
  auto src = spawn(upstream.url("/api"));
  CHECK(attempt(src, "{}").body == "/api/v1/x");
  std::lock_guard<std::mutex> guard{mx};
  REQUIRE(hosts.size() == 1);
  CHECK(hosts[0] == "127.0.0.1:" + std::to_string(upstream.port()));
}

TEST_CASE_METHOD(hostile_fixture, "a bracketed IPv6 base_url works") {
  std::mutex mx;
  std::vector<std::string> hosts;
  raw_upstream upstream{[&](const raw_request& r) -> std::vector<raw_step> {
                          std::lock_guard<std::mutex> guard{mx};
                          hosts.push_back(r.host);
                          return {
                              raw_step::send(raw_response("200 OK", r.target))};
                        },
                        "::1"};
  auto url = upstream.url("/v1");
  REQUIRE(url == "http://[::1]:" + std::to_string(upstream.port()) + "/v1");
  auto src = spawn(url);
  auto r = attempt(src, "{}");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(r.body == "/v1/x"); // not /v1/v1/x (upstream_target)
  std::lock_guard<std::mutex> guard{mx};
  REQUIRE(hosts.size() == 1);
  CHECK(hosts[0] == "[::1]:" + std::to_string(upstream.port()));
}

TEST_CASE("base_url: a bad port, userinfo and other schemes are refused, "
          "saying why") {
  auto refused = [](const std::string& url) {
    http_source_config c;
    c.base_url = url;
    try {
      validate(c);
    } catch (const std::invalid_argument& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused("http://127.0.0.1:abc"),
             StartsWith("base_url:") && Contains("1..65535"));
  CHECK_THAT(refused("http://host:99999"),
             StartsWith("base_url:") && Contains("1..65535"));
  CHECK_THAT(refused("http://host:0"), Contains("1..65535"));
  CHECK_THAT(refused("http://host:"), Contains("1..65535"));
  CHECK_THAT(refused("http://user:pw@host"), StartsWith("base_url:") &&
                                                 Contains("userinfo") &&
                                                 Contains("headers"));
  CHECK_THAT(refused("ftp://api.example.com/v1"),
             StartsWith("base_url:") && Contains("https://"));
  CHECK_THAT(refused("https://user:pw@host"), Contains("userinfo"));
  CHECK_THAT(refused("https://host:0"), Contains("1..65535"));
  CHECK(refused("https://api.example.com/v1").empty());
  CHECK(refused("https://[::1]:8443").empty());
  CHECK_THAT(refused("http://::1:8080"), Contains("brackets"));
  CHECK_THAT(refused("http://[::1"), StartsWith("base_url:"));
  CHECK_THAT(refused("http://[nonsense]:80"), StartsWith("base_url:"));
  CHECK_THAT(refused("http://host/a path"), StartsWith("base_url:"));
  CHECK(refused("http://[::1]:8080/v1").empty());
  CHECK(refused("http://api.example.com/v1").empty());
  CHECK(refused("http://127.0.0.1:65535").empty());
  // The authority is read by the config's one HOST:PORT parser.
  CHECK(refused("http://[::1]").empty()); // the scheme's port
  CHECK(refused("https://[::1]/v1").empty());
  CHECK_THAT(refused("http://[1:2:3]:80"),
             StartsWith("base_url:") && Contains("not an IPv6 address"));
  CHECK_THAT(refused("http://[::1]:65536"), Contains("1..65535"));
  CHECK_THAT(refused("http:///v1"),
             StartsWith("base_url:") && Contains("host is empty"));
  CHECK_THAT(refused("http://-a.example/v1"), StartsWith("base_url:"));
}

// -- resource exhaustion -----------------------------------------------------

// Run only as the child of the case below (hidden: "[.]"); its exit code
// is the verdict.
TEST_CASE("fd exhaustion child: a source used with no descriptor left",
          "[.][fd_child]") {
  int code = 10;
  {
    // A low limit, so that exhausting it is quick.
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_cur, 256);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    http_source_config c;
    c.base_url = "http://127.0.0.1:9"; // never reached: no socket left
    auto src = spawn_http_source(sys, c);
    // Use every descriptor left.
    std::vector<int> fds;
    for (;;) {
      int fd = ::open("/dev/null", O_RDONLY);
      if (fd < 0)
        break;
      fds.push_back(fd);
    }
    code = errno == EMFILE ? 11 : 12;
    if (code == 11) {
      caf::scoped_actor self{sys};
      self->request(src.actor, 10s, attempt_atom_v,
                    call_request{"/v1/x", "{}"})
          .receive(
              [&](const source_reply& r) {
                code = r.kind == policy::outcome_kind::transient ? 0 : 13;
              },
              [&](caf::error&) { code = 14; });
    }
    for (int fd : fds)
      ::close(fd);
  }
  ::_exit(code);
}

TEST_CASE("the child's UBSan filter drops the vptr check's reports only") {
  auto found = sluice::testing::undefined_behaviour(
      "a.hpp:1:2: runtime error: member access within address 0x1 which "
      "does not point to an object of type 'X'\n"
      "0x1: note: object is of type 'X'\n"
      "b.hpp:3:4: runtime error: downcast of address 0x2 which does not "
      "point to an object of type 'Y'\n"
      "0x2: note: object has invalid vptr\n"
      "c.cpp:5:6: runtime error: signed integer overflow: 1 + 2147483647 "
      "cannot be represented in type 'int'\n");
  REQUIRE(found.size() == 1);
  CHECK(found[0].find("signed integer overflow") != std::string::npos);
}

TEST_CASE("a source first used when no file descriptor is left fails the "
          "call, not the process") {
  // In a child process (this binary, the hidden case above): descriptors
  // and rlimits are process-wide, and the failure this guards against was
  // an abort.
  sluice::testing::child_process child{
      // --warn NoTests: a renamed hidden case fails instead of passing.
      {"/proc/self/exe", "--warn", "NoTests",
       "fd exhaustion child: a source used with no descriptor left"},
      {true, true, {}}};
  auto status = child.wait_status(60s);
  auto output = child.rest();
  INFO(output);
  for (auto& report : sluice::testing::undefined_behaviour(output))
    FAIL_CHECK("UBSan in the child: " << report);
  INFO("0 = transient; 11..14 = other outcomes; a signal = a crash or a "
       "hang");
  REQUIRE_FALSE(WIFSIGNALED(status));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
