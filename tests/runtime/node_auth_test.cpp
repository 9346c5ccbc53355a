// Who may call the node and who may operate it (SPEC §8): client keys
// (401 without one, models per key, the key as the session tier with
// X-Session-Id sub-sessions, a request rate of its own), the operations
// endpoints behind the admin key or on node.admin_listen (a breaker reset
// over HTTP), and the trace each request leaves: X-Request-Id and one
// access-log line. Over real sockets on loopback.

#include "node_auth_shared.hpp"

using namespace node_auth_test_support;

TEST_CASE("auth: no key or a wrong key or a malformed header is 401 "
          "invalid_api_key - the right key in any of three headers passes",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  auto none = exchange(p, http::verb::post, "/v1/chat/completions", chat);
  CHECK(none.status == 401);
  CHECK(code_of(none) == "invalid_api_key");
  CHECK(none.doc()["error"]["type"] == "invalid_request_error");
  CHECK(none.header("www-authenticate").rfind("Bearer", 0) == 0);
  auto wrong = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                             bearer("key-x-0123456789abcdef"));
  CHECK(wrong.status == 401);
  CHECK(wrong.body.find("key-x") == std::string::npos); // never echoed
  auto basic = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                             {{"Authorization", "Basic dXNlcjpwYXNz"}});
  CHECK(basic.status == 401);
  auto twice = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                             {{"api-key", key_b}, {"api-key", key_b}});
  CHECK(twice.status == 401);
  // Unknown routes are 401 too: nothing is told to a client without a key.
  CHECK(exchange(p, http::verb::post, "/nope", "{}").status == 401);
  // The right key: as a bearer token (scheme in any case), api-key, x-api-key.
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      bearer(key_b))
            .status == 200);
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      {{"Authorization", std::string{"bearer "} + key_b}})
            .status == 200);
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      {{"api-key", key_b}})
            .status == 200);
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      {{"x-api-key", key_b}})
            .status == 200);
  // /healthz needs nothing.
  CHECK(exchange(p, http::verb::get, "/healthz").status == 200);
}

TEST_CASE("auth: a key uses only its models - others are 404 "
          "model_not_found, and /v1/models lists only its own",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  auto r = exchange_with(p, http::verb::post, "/v1/chat/completions",
                         R"({"model":"gpt-4o","messages":[]})", bearer(key_a));
  CHECK(r.status == 404);
  CHECK(code_of(r) == "model_not_found");
  CHECK(r.doc()["error"]["param"] == "model");
  // Key b may use any model.
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions",
                      R"({"model":"gpt-4o","messages":[]})", bearer(key_b))
            .status == 200);
  auto ids = [&](const std::string& key) {
    auto doc =
        exchange_with(p, http::verb::get, "/v1/models", "", bearer(key)).doc();
    std::set<std::string> out;
    for (auto& m : doc["data"])
      out.insert(m["id"].get<std::string>());
    return out;
  };
  CHECK(ids(key_a) == std::set<std::string>{"sim-chat"});
  CHECK(ids(key_b) == std::set<std::string>{"gpt-4o", "sim-chat"});
  CHECK(
      exchange_with(p, http::verb::get, "/v1/models/gpt-4o", "", bearer(key_a))
          .status == 404);
  CHECK(exchange(p, http::verb::get, "/v1/models").status == 401);
}

TEST_CASE("auth: a key's concurrency cap is its session tier - over it is "
          "tool_busy tier session, and other keys are not touched",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  auto held = std::async(std::launch::async, [&] {
    return exchange_with(p, http::verb::post, "/slow", chat, bearer(key_a));
  });
  REQUIRE(eventually(
      [&] { return node.rt->source("slow").tier->load().in_use == 1; }));
  auto busy = exchange_with(p, http::verb::post, "/slow", chat, bearer(key_a));
  CHECK(busy.status == 503);
  CHECK(code_of(busy) == "tool_busy");
  CHECK(busy.doc()["error"]["tier"] == "session");
  // A sub-session of key a is still within key a's cap.
  auto sub = exchange_with(p, http::verb::post, "/slow", chat,
                           {{"Authorization", std::string{"Bearer "} + key_a},
                            {"X-Session-Id", "other"}});
  CHECK(sub.status == 503);
  CHECK(code_of(sub) == "tool_busy");
  // Key b has its own cap.
  CHECK(
      exchange_with(p, http::verb::post, "/slow", chat, bearer(key_b)).status ==
      200);
  CHECK(held.get().status == 200);
  // /status: names and counts, never ids or keys.
  auto st = exchange_with(p, http::verb::get, "/status", "", bearer(admin));
  REQUIRE(st.status == 200);
  auto doc = st.doc();
  CHECK(doc["tiers"]["keys"]["team-a"]["cap"] == 1);
  CHECK(doc["tiers"]["keys"]["team-a"]["requests"] == 3);
  CHECK(doc["tiers"]["keys"]["team-b"]["cap"] == 2);
  CHECK(st.body.find(key_a) == std::string::npos);
  CHECK(st.body.find("other") == std::string::npos);
}

TEST_CASE("auth: X-Session-Id subdivides a key - each sub-session capped, "
          "and one key's session id never reaches another key's session",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  auto with = [&](const char* key, const std::string& session) {
    return header_list{{"Authorization", std::string{"Bearer "} + key},
                       {"X-Session-Id", session}};
  };
  // Key b, sub-session "shared", holds its one permit (session_cap = 1).
  auto held = std::async(std::launch::async, [&] {
    return exchange_with(p, http::verb::post, "/slow", chat,
                         with(key_b, "shared"));
  });
  REQUIRE(eventually(
      [&] { return node.rt->source("slow").tier->load().in_use == 1; }));
  // The same sub-session again: busy at its own cap.
  auto again =
      exchange_with(p, http::verb::post, "/slow", chat, with(key_b, "shared"));
  CHECK(again.status == 503);
  CHECK(again.doc()["error"]["tier"] == "session");
  // Key a naming the same id gets a session of its own (and it is free).
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      with(key_a, "shared"))
            .status == 200);
  // Another sub-session of key b fits in the key's cap of 2.
  CHECK(exchange_with(p, http::verb::post, "/slow", chat, with(key_b, "t"))
            .status == 200);
  CHECK(held.get().status == 200);
}

TEST_CASE("auth: a key's request rate - over it is 429 rate_limit_exceeded "
          "with Retry-After, before any upstream is asked",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  for (int i = 0; i < 3; ++i)
    CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                        bearer(key_a))
              .status == 200);
  auto calls_before = node.rt->source("fast").tier->load().in_use;
  auto r = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                         bearer(key_a));
  CHECK(r.status == 429);
  CHECK(code_of(r) == "rate_limit_exceeded");
  CHECK(r.doc()["error"]["type"] == "requests");
  // 3 a minute: the next one in 20 s.
  REQUIRE_FALSE(r.retry_after.empty());
  auto after = std::stoi(r.retry_after);
  CHECK(after >= 19);
  CHECK(after <= 20);
  CHECK(node.rt->source("fast").tier->load().in_use == calls_before);
  // Key b has no rate limit.
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      bearer(key_b))
            .status == 200);
  auto st = exchange_with(p, http::verb::get, "/status", "", bearer(admin));
  CHECK(st.doc()["tiers"]["keys"]["team-a"]["rate_limited"] == 1);
}

TEST_CASE("auth: a key's request rate in the front's own time - the 429's "
          "Retry-After is exact and the rate is back when it has passed",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  auto now = std::make_shared<std::atomic<int64_t>>(0);
  // Ahead of the steady clock the keys' buckets were made at.
  auto start = std::chrono::steady_clock::now() + std::chrono::hours{1};
  node.front->use_clock(
      [now, start] { return start + std::chrono::milliseconds{now->load()}; });
  auto p = node.port();
  auto call = [&] {
    return exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                         bearer(key_a));
  };
  for (int i = 0; i < 3; ++i)
    CHECK(call().status == 200);
  auto r = call();
  CHECK(r.status == 429);
  // 3 a minute, the clock standing still: the next one in exactly 20 s.
  CHECK(r.retry_after == "20");
  CHECK(r.doc()["error"]["retry_after_s"] == 20);
  *now = 19999;
  CHECK(call().status == 429);
  *now = 20000;
  CHECK(call().status == 200);
  CHECK(call().status == 429);
}

TEST_CASE("auth: without keys an anonymous client cannot reach another's "
          "session (connection sessions are no X-Session-Id)",
          "[node][auth]") {
  node_under_test node{R"toml(
[node]
access_log = "off"
[admission]
session_cap = 1
wait_timeout_s = 0.2
[sources.slow]
type = "simulated"
  [[sources.slow.phases]]
  latency_min_ms = 400
  latency_max_ms = 400
[routes."/slow"]
sources = ["slow"]
)toml"};
  auto p = node.port();
  // A call without X-Session-Id: its connection's own session.
  auto held = std::async(std::launch::async, [&] {
    return exchange(p, http::verb::post, "/slow", "{}");
  });
  REQUIRE(eventually(
      [&] { return node.rt->source("slow").tier->load().in_use == 1; }));
  // Guessing the connection's session by its old or new name does not
  // join it.
  for (auto guess : {"connection-1", "connection-2", "conn/1", "conn/2"}) {
    INFO(guess);
    CHECK(exchange(p, http::verb::post, "/slow", "{}", guess).status == 200);
  }
  CHECK(held.get().status == 200);
}

TEST_CASE("auth: a node on a non-loopback address refuses to start without "
          "keys unless allow_anonymous is written",
          "[node][auth]") {
  const std::string config = R"toml(
[node]
access_log = "off"
[sources.s]
type = "simulated"
[routes."/r"]
sources = ["s"]
)toml";
  auto on_any = [](file_config& c) { c.node.listen_host = "0.0.0.0"; };
  try {
    node_under_test node{config, on_any};
    FAIL("started without keys on 0.0.0.0");
  } catch (const config_error& e) {
    CHECK(e.key() == "auth");
    CHECK(std::string{e.what()}.find("allow_anonymous") != std::string::npos);
  }
  node_under_test open{config + "[auth]\nallow_anonymous = true\n", on_any};
  CHECK(exchange(open.port(), http::verb::post, "/r", "{}").status == 200);
  // On a non-loopback listener without an admin key, operations are not
  // served there.
  auto st = exchange(open.port(), http::verb::get, "/status");
  CHECK(st.status == 403);
  CHECK(code_of(st) == "permission_denied");
  node_under_test keyed{keyed_config(), on_any};
  CHECK(exchange_with(keyed.port(), http::verb::post, "/v1/chat/completions",
                      chat, bearer(key_b))
            .status == 200);
}
