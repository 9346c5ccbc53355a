// The HTTP source against an HTTPS upstream on loopback (tests/fakes/
// tls_upstream), with a CA and certificates made by the `openssl` command:
// verification (and its reasons when it refuses), SNI, keep-alive reuse
// without a new handshake, streaming, mutual TLS, a silent handshake, and
// cancellation closing the TLS connection. Real sockets, so real time with
// generous bounds.

#include "sluice/actors/http_source.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "fakes/tls_upstream.hpp"
#include "log_capture.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::log_capture;
using sluice::testing::test_pki;
using sluice::testing::tls_upstream;
using sluice::testing::tls_upstream_options;

namespace {

tls_upstream_options serving(const std::string& cert) {
  auto& pki = test_pki::get();
  return {pki.file(cert + ".pem"), pki.file(cert + ".key"), "", false};
}

// A source trusting the test CA (no system store).
http_source_config trusting_test_ca(const std::string& url) {
  http_source_config c;
  c.base_url = url;
  c.log_name = "tls-test";
  c.tls.emplace();
  c.tls->ca_file = test_pki::get().file("ca.pem");
  c.response_timeout = 10s;
  return c;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  source_reply attempt(const http_source& src, const std::string& route) {
    caf::scoped_actor self{sys};
    source_reply out;
    self->request(src.actor, 20s, attempt_atom_v, call_request{route, "{}"})
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) { FAIL("no reply"); });
    return out;
  }

  template <class Predicate>
  static bool eventually(Predicate p, std::chrono::seconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!p())
      if (std::chrono::steady_clock::now() > end)
        return false;
      else
        std::this_thread::sleep_for(1ms);
    return true;
  }
};

struct chunks {
  std::mutex mx;
  std::string text;
  int count = 0;
  std::string get() {
    std::lock_guard<std::mutex> guard{mx};
    return text;
  }
};

caf::behavior chunk_collector(caf::event_based_actor*,
                              std::shared_ptr<chunks> rec) {
  return {
      [rec](stream_chunk_atom, uint64_t, std::string& bytes) {
        std::lock_guard<std::mutex> guard{rec->mx};
        rec->text += bytes;
        ++rec->count;
      },
      [](status_atom) { return true; }, // a ping, answered after the chunks
  };
}

} // namespace

TEST_CASE_METHOD(fixture, "TLS: a verified upstream answers (SNI and the "
                          "name checked are the URL's host)",
                 "[tls]") {
  tls_upstream upstream{serving("server")};
  auto src = spawn_http_source(sys, trusting_test_ca(upstream.url("/api",
                                                                  "localhost")));
  CHECK(src.tls);
  CHECK(src.tls_verify);
  auto r = attempt(src, "/v1/ok");
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(r.body == R"({"ok":true})");
  CHECK(upstream.last_server_name() == "localhost");
  CHECK(src.stats->tls_handshakes == 1);
  CHECK(src.stats->tls_verify_failures == 0);
}

TEST_CASE_METHOD(fixture, "TLS: keep-alive reuse - many calls, one handshake",
                 "[tls]") {
  tls_upstream upstream{serving("server")};
  // An IP address: checked against the certificate's IP entry, no SNI.
  auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
  for (int i = 0; i < 6; ++i)
    CHECK(attempt(src, "/v1/ok").kind == policy::outcome_kind::ok);
  CHECK(upstream.handshakes == 1);
  CHECK(upstream.connections == 1);
  CHECK(upstream.last_server_name().empty());
  CHECK(src.stats->tls_handshakes == 1);
  CHECK(src.stats->connections_opened == 1);
  CHECK(src.stats->connections_reused == 5);
  CHECK(upstream.requests == 6);
}

TEST_CASE_METHOD(fixture, "TLS: a streamed answer passes through as it "
                          "arrives",
                 "[tls]") {
  tls_upstream upstream{serving("server")};
  auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
  auto rec = std::make_shared<chunks>();
  auto collector = sys.spawn(chunk_collector, rec);
  call_request req{"/v1/stream", R"({"stream":true})"};
  req.stream = true;
  req.stream_to = collector;
  caf::scoped_actor self{sys};
  source_reply r;
  self->request(src.actor, 20s, attempt_atom_v, req)
      .receive([&](source_reply& x) { r = std::move(x); },
               [&](caf::error&) { FAIL("no reply"); });
  self->request(collector, 10s, status_atom_v)
      .receive([](bool) {}, [&](caf::error&) { FAIL("no collector"); });
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(r.body.empty());
  auto text = rec->get();
  CHECK(text.find("part 0") < text.find("part 2"));
  CHECK(text.find("data: [DONE]") != std::string::npos);
  {
    std::lock_guard<std::mutex> guard{rec->mx};
    CHECK(rec->count >= 2); // pieces as they came, not one body at the end
  }
  // The connection is reusable after a complete chunked answer.
  CHECK(attempt(src, "/v1/ok").kind == policy::outcome_kind::ok);
  CHECK(upstream.handshakes == 1);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(fixture, "TLS: a certificate that does not verify is "
                          "refused with its reason",
                 "[tls]") {
  // (Each refusal logs a rate-limited line: the log is checked once.)
  SECTION("the wrong name: tls.server_name is what is checked") {
    log_capture log;
    tls_upstream upstream{serving("server")};
    auto c = trusting_test_ca(upstream.url());
    c.tls->server_name = "wrong.example";
    auto src = spawn_http_source(sys, c);
    auto r = attempt(src, "/v1/ok");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.find("hostname mismatch") != std::string::npos);
    CHECK(upstream.last_server_name().empty()); // its handshake failed
    CHECK(upstream.requests == 0);
    CHECK(src.stats->tls_verify_failures == 1);
    CHECK(log.has("tls-test", "wrong.example", "refused", "hostname mismatch"));
  }
  SECTION("an unknown CA") {
    tls_upstream upstream{serving("stranger")};
    auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
    auto r = attempt(src, "/v1/ok");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.find("unable to get local issuer certificate") !=
          std::string::npos);
    CHECK(upstream.requests == 0);
    CHECK(src.stats->tls_verify_failures == 1);
  }
  SECTION("the system store does not know the test CA") {
    tls_upstream upstream{serving("server")};
    http_source_config c;
    c.base_url = upstream.url();
    auto src = spawn_http_source(sys, c); // verified by default
    auto r = attempt(src, "/v1/ok");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.find("certificate refused") != std::string::npos);
    CHECK(upstream.requests == 0);
  }
  SECTION("an expired certificate") {
    tls_upstream upstream{serving("expired")};
    auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
    auto r = attempt(src, "/v1/ok");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(r.body.find("certificate has expired") != std::string::npos);
    CHECK(upstream.requests == 0);
  }
}

TEST_CASE_METHOD(fixture, "TLS: tls.server_name names the upstream for SNI "
                          "and the check",
                 "[tls]") {
  tls_upstream upstream{serving("server")};
  auto c = trusting_test_ca(upstream.url()); // an IP address in the URL
  c.tls->server_name = "localhost";
  auto src = spawn_http_source(sys, c);
  CHECK(attempt(src, "/v1/ok").kind == policy::outcome_kind::ok);
  CHECK(upstream.last_server_name() == "localhost");
}

TEST_CASE_METHOD(fixture, "TLS: verify = false accepts any certificate, "
                          "loudly",
                 "[tls]") {
  log_capture log;
  tls_upstream upstream{serving("stranger")};
  http_source_config c;
  c.base_url = upstream.url();
  c.log_name = "insecure";
  c.tls.emplace();
  c.tls->verify = false;
  auto src = spawn_http_source(sys, c);
  CHECK_FALSE(src.tls_verify);
  CHECK(log.has("warning", "insecure", "tls.verify = false"));
  CHECK(attempt(src, "/v1/ok").kind == policy::outcome_kind::ok);
}

TEST_CASE_METHOD(fixture, "TLS: an upstream that requires a client "
                          "certificate",
                 "[tls]") {
  auto& pki = test_pki::get();
  auto opts = serving("server");
  opts.client_ca_file = pki.file("ca.pem");
  tls_upstream upstream{opts};
  SECTION("gets it from tls.client_cert / tls.client_key") {
    auto c = trusting_test_ca(upstream.url());
    c.tls->client_cert = pki.file("client.pem");
    c.tls->client_key = pki.file("client.key");
    auto src = spawn_http_source(sys, c);
    CHECK(attempt(src, "/v1/ok").kind == policy::outcome_kind::ok);
    CHECK(upstream.handshakes == 1);
  }
  SECTION("refuses a source without one") {
    auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
    auto r = attempt(src, "/v1/ok");
    CHECK(r.kind == policy::outcome_kind::transient);
    CHECK(upstream.handshakes == 0);
    // The upstream's side may finish just after the source got its alert.
    CHECK(eventually([&] { return upstream.handshake_failures == 1; }));
    CHECK(upstream.requests == 0);
  }
}

TEST_CASE_METHOD(fixture, "TLS: a peer that never answers the handshake is "
                          "a connect timeout",
                 "[tls]") {
  auto opts = serving("server");
  opts.silent = true;
  tls_upstream upstream{opts};
  auto c = trusting_test_ca(upstream.url());
  c.connect_timeout = 300ms;
  c.first_byte_timeout = 30s;
  c.response_timeout = 30s;
  auto src = spawn_http_source(sys, c);
  auto t0 = std::chrono::steady_clock::now();
  auto r = attempt(src, "/v1/ok");
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.kind == policy::outcome_kind::transient); // as a connect failure
  CHECK(r.body.find("TLS handshake failed: timed out") != std::string::npos);
  CHECK(took >= 300ms);
  CHECK(took < 10s); // the connect timeout, not the 30 s ones
  CHECK(upstream.connections == 1);
  CHECK(src.stats->connections_opened == 1);
  CHECK(src.stats->tls_handshakes == 0);
  CHECK(src.stats->tls_handshake_failures == 1);
}

TEST_CASE_METHOD(fixture, "TLS: cancelling a streamed call closes the "
                          "upstream connection",
                 "[tls]") {
  tls_upstream upstream{serving("server")};
  auto src = spawn_http_source(sys, trusting_test_ca(upstream.url()));
  auto rec = std::make_shared<chunks>();
  auto collector = sys.spawn(chunk_collector, rec);
  auto requester = sys.spawn([&](caf::event_based_actor* self) {
    call_request req{"/v1/endless", R"({"stream":true})"};
    req.stream = true;
    req.stream_to = collector;
    self->request(src.actor, caf::infinite, attempt_atom_v, req)
        .then([](const source_reply&) {}, [](caf::error&) {});
  });
  REQUIRE(eventually([&] { return rec->get().find("part 1") !=
                                  std::string::npos; }));
  CHECK(upstream.closed_by_client == 0); // it streams on meanwhile
  caf::anon_send_exit(requester, caf::exit_reason::kill);
  CHECK(eventually([&] { return src.stats->cancelled == 1; }));
  CHECK(eventually([&] { return upstream.closed_by_client == 1; }));
  CHECK(src.stats->in_flight == 0);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
}

TEST_CASE("TLS: settings that cannot work are refused, naming the field",
          "[tls]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto& pki = test_pki::get();
  http_source_config c;
  c.base_url = "https://127.0.0.1:8443";
  c.tls.emplace();
  SECTION("tls on an http:// URL") {
    c.base_url = "http://127.0.0.1:8080";
    CHECK_THROWS_WITH(spawn_http_source(sys, c), Catch::StartsWith("tls:"));
  }
  SECTION("a CA file that is missing or holds no certificate") {
    c.tls->ca_file = pki.file("missing.pem");
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.ca_file: cannot read"));
    c.tls->ca_file = pki.file("not_a_cert.pem");
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.ca_file: no CA certificate"));
  }
  SECTION("a client key that does not match the certificate") {
    c.tls->client_cert = pki.file("client.pem");
    c.tls->client_key = pki.file("server.key");
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.client_key:") &&
                          Catch::Contains("does not match"));
  }
  SECTION("a client certificate without its key") {
    c.tls->client_cert = pki.file("client.pem");
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.client_key:"));
  }
  SECTION("an unreadable key") {
    c.tls->client_cert = pki.file("client.pem");
    c.tls->client_key = pki.file("no_such.key");
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.client_key: cannot read"));
  }
  SECTION("a server name that is neither a host name nor an address") {
    c.tls->server_name = "bad name!";
    CHECK_THROWS_WITH(spawn_http_source(sys, c),
                      Catch::StartsWith("tls.server_name:"));
  }
  SECTION("the defaults start (the system store loads)") {
    c.tls.reset();
    CHECK_NOTHROW(spawn_http_source(sys, c));
  }
}
