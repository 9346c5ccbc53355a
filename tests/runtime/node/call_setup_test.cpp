// What a call takes from its headers: the session namespaces (no client can
// join another's session) and the headers forwarded upstream.

#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/call_setup.hpp"
#include "sluice/runtime/node/request_reading.hpp"

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

// -- plan_call: the body, the key's models, the route --------------------

namespace {

// A route serving "gpt-4o" (and, with a default, anything else).
route_miss route_of(const std::string& model, bool has_default) {
  if (model == "gpt-4o")
    return route_miss::none;
  if (model.empty())
    return has_default ? route_miss::none : route_miss::model_required;
  return has_default ? route_miss::none : route_miss::model_not_found;
}

call_plan plan(const std::string& body, const std::string* key = nullptr,
               bool has_default = true) {
  std::function<bool(const std::string&)> may_use;
  if (key)
    may_use = [](const std::string& m) { return m == "gpt-4o"; };
  return plan_call(
      body, key, may_use,
      [has_default](const std::string& m) { return route_of(m, has_default); },
      "/v1/chat/completions");
}

} // namespace

TEST_CASE_METHOD(fixture, "plan_call: a call goes with its model and stream flag") {
  auto p = plan(R"({"model":"gpt-4o","stream":true})");
  CHECK_FALSE(p.error);
  CHECK(p.model == "gpt-4o");
  CHECK(p.stream);
  p = plan(R"({"model":"other"})");
  CHECK_FALSE(p.error);
  CHECK_FALSE(p.stream);
}

TEST_CASE_METHOD(fixture, "plan_call: a body that is no JSON object is a 400") {
  auto p = plan("[1,2]");
  REQUIRE(p.error);
  CHECK(*p.error == errc::bad_request);
  CHECK(p.param == nullptr);
  CHECK(p.model.empty());
}

TEST_CASE_METHOD(fixture, "plan_call: a key's other model does not exist for it") {
  auto p = plan(R"({"model":"other"})", &alice);
  REQUIRE(p.error);
  CHECK(*p.error == errc::model_not_found);
  CHECK(std::string{p.param} == "model");
  CHECK(p.model == "other"); // for the access log
  CHECK(p.why.find("other") != std::string::npos);
}

TEST_CASE_METHOD(fixture, "plan_call: a limited key must name a model") {
  auto p = plan(R"({"stream":false})", &alice);
  REQUIRE(p.error);
  CHECK(*p.error == errc::bad_request);
  CHECK(std::string{p.param} == "model");
  CHECK(p.why.find("alice") != std::string::npos);
}

TEST_CASE_METHOD(fixture, "plan_call: the route's misses, each with its code") {
  auto p = plan(R"({"stream":false})", nullptr, false);
  REQUIRE(p.error);
  CHECK(*p.error == errc::bad_request); // model_required
  CHECK(std::string{p.param} == "model");
  p = plan(R"({"model":"other"})", nullptr, false);
  REQUIRE(p.error);
  CHECK(*p.error == errc::model_not_found);
  auto gone = plan_call(
      R"({"model":"gpt-4o"})", nullptr, {},
      [](const std::string&) { return route_miss::no_route; }, "/v1/x");
  REQUIRE(gone.error);
  CHECK(*gone.error == errc::not_found);
  CHECK(gone.param == nullptr);
}
