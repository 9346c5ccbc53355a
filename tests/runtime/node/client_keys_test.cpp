// The pure parts of who-is-asking: which header presents a key, the
// operations-access rule, request ids and trace headers, and the access
// log's line.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sluice/runtime/node/access_log.hpp"
#include "sluice/runtime/node/client_keys.hpp"
#include "sluice/runtime/node/request_reading.hpp"

using namespace sluice;
using namespace sluice::node;
namespace http = boost::beast::http;

TEST_CASE("the key a request presents: Bearer, api-key, x-api-key") {
  sluice::http_fields h;
  CHECK(read_presented_key(h).what == presented_key::kind::none);
  h.set(http::field::authorization, "Bearer  sk-1  ");
  auto k = read_presented_key(h);
  CHECK(k.what == presented_key::kind::token);
  CHECK(k.token == "sk-1");
  h.set(http::field::authorization, "BEARER sk-2");
  CHECK(read_presented_key(h).token == "sk-2");
  h.set(http::field::authorization, "Basic eA==");
  CHECK(read_presented_key(h).what == presented_key::kind::malformed);
  h.set(http::field::authorization, "Bearer ");
  CHECK(read_presented_key(h).what == presented_key::kind::malformed);
  sluice::http_fields a;
  a.set("api-key", "sk-3");
  CHECK(read_presented_key(a).token == "sk-3");
  a.insert("api-key", "sk-4");
  CHECK(read_presented_key(a).what == presented_key::kind::malformed);
  sluice::http_fields x;
  x.set("x-api-key", "sk-5");
  CHECK(read_presented_key(x).token == "sk-5");
  // Authorization wins over the others.
  x.set(http::field::authorization, "Bearer sk-6");
  CHECK(read_presented_key(x).token == "sk-6");
}

TEST_CASE("who may reach the operations endpoints") {
  auto decide = [](auto set) {
    ops_request r;
    set(r);
    return decide_ops_access(r);
  };
  // The admin listener serves anyone who reaches it.
  CHECK(decide([](ops_request& r) {
          r.on_admin_listener = true;
          r.admin_key_configured = true;
          r.admin_listener_configured = true;
          r.client_keys_configured = true;
        }) == ops_access::allowed);
  CHECK(decide([](ops_request& r) {
          r.admin_key_configured = true;
          r.admin_key_presented = true;
          r.client_keys_configured = true;
        }) == ops_access::allowed);
  CHECK(decide([](ops_request& r) {
          r.admin_key_configured = true;
          r.main_listener_loopback = true;
        }) == ops_access::need_admin_key);
  CHECK(decide([](ops_request& r) {
          r.admin_listener_configured = true;
          r.main_listener_loopback = true;
        }) == ops_access::not_here);
  CHECK(decide([](ops_request&) {}) == ops_access::not_here);
  // Loopback and nothing configured: a developer's node.
  CHECK(decide([](ops_request& r) { r.main_listener_loopback = true; }) ==
        ops_access::allowed);
  // Client keys without an admin key: the main listener is for clients
  // (a reverse proxy on the host would pass anyone's /admin/).
  CHECK(decide([](ops_request& r) {
          r.main_listener_loopback = true;
          r.client_keys_configured = true;
        }) == ops_access::not_here);
}

TEST_CASE("request ids and trace headers taken from a client") {
  CHECK(valid_request_id("req-42"));
  CHECK(valid_request_id("a1b2:c3/d4+e5=f6@g7_h8.i9"));
  CHECK_FALSE(valid_request_id(""));
  CHECK_FALSE(valid_request_id("has space"));
  CHECK_FALSE(valid_request_id("quote\""));
  CHECK_FALSE(valid_request_id(std::string(129, 'a')));
  CHECK(valid_request_id(std::string(128, 'a')));
  auto tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  CHECK(valid_trace_header("traceparent", tp));
  CHECK(valid_trace_header("traceparent", std::string{tp} + "-future"));
  CHECK_FALSE(valid_trace_header("traceparent", std::string{tp} + "x"));
  CHECK_FALSE(valid_trace_header(
      "traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"));
  CHECK_FALSE(valid_trace_header("traceparent", "00-xyz"));
  CHECK(valid_trace_header("tracestate", "rojo=00f067aa0ba902b7, congo=t61"));
  CHECK_FALSE(valid_trace_header("tracestate", "a\nb"));
  CHECK_FALSE(valid_trace_header("tracestate", std::string(513, 'a')));
}

TEST_CASE("an access-log line has every field, nulls for the empty ones") {
  access_record r;
  r.time = std::chrono::system_clock::time_point{
      std::chrono::milliseconds{1764607227123}};
  r.request_id = "req-1";
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.model = "gpt-4o";
  r.status = 503;
  r.error = "tool_busy";
  r.attempts = 0;
  r.total = std::chrono::milliseconds{250};
  r.upstream = std::chrono::milliseconds{0};
  auto doc = nlohmann::json::parse(access_line(r));
  CHECK(doc["time"] == "2025-12-01T16:40:27.123Z");
  CHECK(doc["request_id"] == "req-1");
  CHECK(doc["key"].is_null());
  CHECK(doc["source"].is_null());
  CHECK(doc["status"] == 503);
  CHECK(doc["error"] == "tool_busy");
  CHECK(doc["total_ms"] == 250.0);
  CHECK(doc["overhead_us"] == 250000);
  CHECK(doc["hedged"] == 0);
  CHECK(doc["won_attempt"].is_null());
  // A hedged call: which attempt's answer the client got.
  r.attempts = 2;
  r.hedged = 1;
  r.won_attempt = 1;
  doc = nlohmann::json::parse(access_line(r));
  CHECK(doc["attempts"] == 2);
  CHECK(doc["hedged"] == 1);
  CHECK(doc["won_attempt"] == 1);
  // Invalid UTF-8 from a client does not break the line.
  r.model = "\xff\xfe";
  CHECK(nlohmann::json::parse(access_line(r), nullptr, false).is_object());
}

TEST_CASE("a key under new settings is the same client: its tier, its rate") {
  // Issue 30, finding 4: a reload that raised a key's cap gave it a tier
  // of its own beside the old one's calls. (No owner actor here: the
  // counter is the tier's fast path, what the cap is.)
  tier_handle tier;
  tier.kind = tier_kind::session;
  tier.counter = std::make_shared<policy::tier_counter>(3);
  client_key_config cfg;
  cfg.name = "alpha";
  cfg.max_concurrent = 3;
  cfg.requests_per_minute = 2;
  client_key old{cfg, tier, time_point{}};
  for (int i = 0; i < 3; ++i)
    REQUIRE(tier.counter->try_acquire());
  old.requests = 5;
  CHECK_FALSE(old.take(time_point{}));
  CHECK_FALSE(old.take(time_point{}));
  CHECK(old.take(time_point{})); // spent: the next in 30 s
  auto raised_cfg = cfg;
  raised_cfg.max_concurrent = 4;
  client_key raised{raised_cfg, old, time_point{}};
  CHECK(raised.tier().counter == tier.counter);
  CHECK(tier.counter->cap() == 4);
  CHECK(tier.counter->try_acquire()); // 4 of 4
  CHECK_FALSE(tier.counter->try_acquire());
  CHECK(raised.requests == 5);
  CHECK(raised.take(time_point{})); // the same rate: still spent
  // Lowered under the calls in flight: nothing until they are under it.
  auto lowered_cfg = cfg;
  lowered_cfg.max_concurrent = 2;
  lowered_cfg.requests_per_minute = 60; // a new rate starts full
  client_key lowered{lowered_cfg, raised, time_point{}};
  CHECK(tier.counter->cap() == 2);
  tier.counter->release();
  tier.counter->release();
  CHECK_FALSE(tier.counter->try_acquire()); // 2 in flight, cap 2
  tier.counter->release();
  CHECK(tier.counter->try_acquire());
  CHECK_FALSE(lowered.take(time_point{}));
}
