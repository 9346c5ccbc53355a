// What a call takes from its headers: the session namespaces (no client can
// join another's session) and the headers forwarded upstream.

#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/call_setup.hpp"
#include "sluice/runtime/node/router.hpp"

using namespace sluice;
using namespace sluice::node;
namespace http = boost::beast::http;

namespace {

struct fixture {
  sluice::http_fields headers;
  std::string alice = "alice";
};

} // namespace

TEST_CASE_METHOD(fixture, "call setup: sessions without X-Session-Id") {
  auto anon = session_for(headers, nullptr, 42);
  CHECK(anon.error.empty());
  CHECK(anon.name == "conn/42");
  auto key = session_for(headers, &alice, 42);
  CHECK(key.error.empty());
  CHECK(key.name.empty()); // the key itself is the session
}

TEST_CASE_METHOD(fixture, "call setup: sessions in their namespaces") {
  headers.set("X-Session-Id", "s-1");
  CHECK(session_for(headers, nullptr, 7).name == "anon/s-1");
  CHECK(session_for(headers, &alice, 7).name == "key/alice/s-1");
  // A client naming another's namespace stays in its own.
  headers.set("X-Session-Id", "key/bob/s-1");
  CHECK(session_for(headers, nullptr, 7).name == "anon/key/bob/s-1");
}

TEST_CASE_METHOD(fixture, "call setup: a bad X-Session-Id is refused") {
  headers.insert("X-Session-Id", "a");
  headers.insert("X-Session-Id", "b");
  auto twice = session_for(headers, &alice, 1);
  CHECK(twice.error == "more than one X-Session-Id header");
  sluice::http_fields spaced;
  spaced.set("X-Session-Id", "has space");
  auto bad = session_for(spaced, nullptr, 1);
  CHECK(bad.error == "X-Session-Id must be 1 to " +
                         std::to_string(max_session_id_bytes) +
                         " printable ASCII characters");
  spaced.set("X-Session-Id", std::string(max_session_id_bytes + 1, 'x'));
  CHECK_FALSE(session_for(spaced, nullptr, 1).error.empty());
}

TEST_CASE_METHOD(fixture, "call setup: the headers forwarded upstream") {
  auto plain = forwarded_headers(headers, "rid-1");
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].first == "X-Request-Id");
  CHECK(plain[0].second == "rid-1");
  headers.set("traceparent",
              "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  headers.set("tracestate", "congo=t61rcWkgMzE");
  headers.set("X-Other", "not forwarded");
  auto traced = forwarded_headers(headers, "rid-2");
  REQUIRE(traced.size() == 3);
  CHECK(traced[1].first == "traceparent");
  CHECK(traced[2].first == "tracestate");
  CHECK(traced[2].second == "congo=t61rcWkgMzE");
  // Sent twice, or malformed: not forwarded.
  headers.insert("tracestate", "again=1");
  headers.set("traceparent", "not-a-traceparent");
  CHECK(forwarded_headers(headers, "rid-3").size() == 1);
}
