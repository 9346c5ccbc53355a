// Who may call the node and who may operate it (SPEC §8): client keys
// (401 without one, models per key, the key as the session tier with
// X-Session-Id sub-sessions, a request rate of its own), the operations
// endpoints behind the admin key or on node.admin_listen (a breaker reset
// over HTTP), and the trace each request leaves: X-Request-Id and one
// access-log line. Over real sockets on loopback.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "sluice/runtime/config_error.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::node_under_test;
using namespace sluice::testing::loopback;

namespace {

constexpr const char* key_a = "key-a-0123456789abcdef";
constexpr const char* key_b = "key-b-0123456789abcdef";
constexpr const char* admin = "admin-0123456789abcdef";

void set_keys() {
  ::setenv("SLUICE_TEST_KEY_A", key_a, 1);
  ::setenv("SLUICE_TEST_KEY_B", key_b, 1);
  ::setenv("SLUICE_TEST_ADMIN", admin, 1);
}

// Two simulated sources: `fast` answers at once; `slow` takes 1.5 s (to
// hold permits while two 0.2 s admission waits run out). Key a may use sim-* models only, holds one call at a
// time and makes 3 requests a minute; key b holds two, in sub-sessions of
// one each (session_cap).
std::string keyed_config(const std::string& extra = "") {
  set_keys();
  return R"toml(
[node]
access_log = "off"

[admission]
session_cap = 1
wait_timeout_s = 0.2

[auth]
admin_key = "env:SLUICE_TEST_ADMIN"
  [auth.keys.team-a]
  key = "env:SLUICE_TEST_KEY_A"
  models = ["sim-*"]
  max_concurrent = 1
  requests_per_minute = 3
  [auth.keys.team-b]
  key = "env:SLUICE_TEST_KEY_B"
  max_concurrent = 2

[sources.fast]
type = "simulated"
  [[sources.fast.phases]]
  latency_min_ms = 0
  latency_max_ms = 0

[sources.slow]
type = "simulated"
  [[sources.slow.phases]]
  latency_min_ms = 1500
  latency_max_ms = 1500

[kinds.chat]                # a route with no source left fails in 0.5 s
stall_window_s = 0.5
poll_interval_s = 0.1

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fast"]
  [routes."/v1/chat/completions".models]
  "sim-chat" = ["fast"]
  "gpt-4o" = ["fast"]

[routes."/slow"]
kind = "chat"
sources = ["slow"]
)toml" + extra;
}

header_list bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}};
}

const std::string chat = R"({"model":"sim-chat","messages":[]})";

std::string code_of(const reply& r) {
  auto doc = r.doc();
  if (!doc.is_object() || !doc.contains("error"))
    return "";
  return doc["error"]["code"].get<std::string>();
}

} // namespace

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
  CHECK(exchange_with(p, http::verb::get, "/v1/models/gpt-4o", "",
                      bearer(key_a))
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
  CHECK(exchange_with(p, http::verb::post, "/slow", chat, bearer(key_b))
            .status == 200);
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
  node.front->use_clock([now, start] {
    return start + std::chrono::milliseconds{now->load()};
  });
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

TEST_CASE("admin: operations need the admin key - a breaker is isolated and "
          "reset over HTTP",
          "[node][auth][admin]") {
  node_under_test node{keyed_config()};
  auto p = node.port();
  for (auto path : {"/status", "/metrics", "/events"}) {
    INFO(path);
    CHECK(exchange(p, http::verb::get, path).status == 401);
    // A client key is not the admin key.
    CHECK(exchange_with(p, http::verb::get, path, "", bearer(key_b)).status ==
          401);
  }
  CHECK(exchange_with(p, http::verb::get, "/metrics", "", bearer(admin))
            .status == 200);
  CHECK(exchange(p, http::verb::post, "/admin/breakers/fast/isolate", "")
            .status == 401);
  auto iso = exchange_with(p, http::verb::post, "/admin/breakers/fast/isolate",
                           "", bearer(admin));
  REQUIRE(iso.status == 200);
  CHECK(iso.doc()["state"] == "open");
  CHECK(iso.doc()["isolated"] == true);
  // The route's only source is isolated: calls stall out.
  auto r = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                         bearer(key_b));
  CHECK(r.status == 503);
  CHECK(code_of(r) == "all_sources_exhausted");
  auto reset = exchange_with(p, http::verb::post, "/admin/breakers/fast/reset",
                             "", bearer(admin));
  REQUIRE(reset.status == 200);
  CHECK(reset.doc()["state"] == "closed");
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      bearer(key_b))
            .status == 200);
  // Unknown source or action, wrong method.
  CHECK(exchange_with(p, http::verb::post, "/admin/breakers/nope/reset", "",
                      bearer(admin))
            .status == 404);
  CHECK(exchange_with(p, http::verb::post, "/admin/breakers/fast/explode", "",
                      bearer(admin))
            .status == 404);
  CHECK(exchange_with(p, http::verb::get, "/admin/breakers/fast/reset", "",
                      bearer(admin))
            .status == 405);
}

TEST_CASE("admin: with node.admin_listen, operations are served there "
          "without a key and refused on the main listener",
          "[node][auth][admin]") {
  node_under_test node{R"toml(
[node]
access_log = "off"
admin_listen = "127.0.0.1:0"
[sources.s]
type = "simulated"
  [[sources.s.phases]]
  latency_min_ms = 0
  latency_max_ms = 0
[routes."/r"]
sources = ["s"]
)toml"};
  auto main = node.port();
  auto ops = node.front->admin_port();
  REQUIRE(ops != 0);
  REQUIRE(ops != main);
  auto refused = exchange(main, http::verb::get, "/status");
  CHECK(refused.status == 403);
  CHECK(refused.body.find("admin_listen") != std::string::npos);
  CHECK(exchange(ops, http::verb::get, "/status").status == 200);
  CHECK(exchange(ops, http::verb::get, "/healthz").status == 200);
  CHECK(exchange(ops, http::verb::post, "/admin/breakers/s/reset", "")
            .status == 200);
  // Calls are for the main listener only.
  CHECK(exchange(ops, http::verb::post, "/r", "{}").status == 404);
  CHECK(exchange(main, http::verb::post, "/r", "{}").status == 200);
}

TEST_CASE("trace: X-Request-Id is taken when valid (else generated) and "
          "returned - the access log has one line per request with its fields",
          "[node][trace]") {
  auto log_path = std::string{"/tmp/sluice-access-"} +
                  std::to_string(::getpid()) + ".log";
  std::remove(log_path.c_str());
  {
    node_under_test node{keyed_config(),
                         [&](file_config& c) { c.node.access_log = log_path; }};
    auto p = node.port();
    auto given = exchange_with(p, http::verb::post, "/v1/chat/completions",
                               chat,
                               {{"Authorization", std::string{"Bearer "} +
                                                      key_b},
                                {"X-Request-Id", "req-42"}});
    CHECK(given.status == 200);
    CHECK(given.header("x-request-id") == "req-42");
    auto made = exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                              {{"X-Request-Id", "bad id with spaces"}});
    CHECK(made.status == 401);
    auto id = made.header("x-request-id");
    CHECK(id.size() == 32);
    CHECK(id != "bad id with spaces");
  }
  std::ifstream in{log_path};
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(json::parse(line, nullptr, false));
  std::remove(log_path.c_str());
  REQUIRE(lines.size() == 2);
  auto& ok = lines[0];
  CHECK(ok["request_id"] == "req-42");
  CHECK(ok["method"] == "POST");
  CHECK(ok["path"] == "/v1/chat/completions");
  CHECK(ok["model"] == "sim-chat");
  CHECK(ok["key"] == "team-b");
  CHECK(ok["status"] == 200);
  CHECK(ok["error"].is_null());
  CHECK(ok["source"] == "fast");
  CHECK(ok["attempts"] == 1);
  CHECK(ok["total_ms"].get<double>() >= ok["upstream_ms"].get<double>());
  CHECK(ok["overhead_us"].get<int64_t>() >= 0);
  CHECK(ok["time"].get<std::string>().size() == 24); // 2026-12-01T16:40:27.123Z
  auto& refused = lines[1];
  CHECK(refused["status"] == 401);
  CHECK(refused["error"] == "invalid_api_key");
  CHECK(refused["key"].is_null());
  CHECK(refused["request_id"].get<std::string>().size() == 32);
}

TEST_CASE("auth config: keys by reference only, checked with key and line",
          "[node][auth][config]") {
  set_keys();
  auto refused = [](const std::string& text) -> std::string {
    try {
      parse_config(text + "[sources.s]\ntype = \"simulated\"\n"
                          "[routes.\"/r\"]\nsources = [\"s\"]\n");
    } catch (const config_error& e) {
      return e.key() + "@" + std::to_string(e.line()) + ": " + e.what();
    }
    return "";
  };
  auto plain = refused("[auth.keys.a]\nkey = \"sk-plaintext-0123456789\"\n");
  CHECK(plain.rfind("auth.keys.a.key@2", 0) == 0);
  CHECK(plain.find("env:VAR") != std::string::npos);
  CHECK(plain.find("sk-plaintext") == std::string::npos); // never echoed
  CHECK(refused("[auth.keys.a]\nkey = \"env:SLUICE_TEST_UNSET_VARIABLE\"\n")
            .find("not set") != std::string::npos);
  ::setenv("SLUICE_TEST_SHORT", "short", 1);
  CHECK(refused("[auth.keys.a]\nkey = \"env:SLUICE_TEST_SHORT\"\n")
            .find("at least 16") != std::string::npos);
  CHECK(refused("[auth.keys.a]\nkey = \"env:SLUICE_TEST_KEY_A\"\n"
                "[auth.keys.b]\nkey = \"env:SLUICE_TEST_KEY_A\"\n")
            .find("same key") != std::string::npos);
  CHECK(refused("[auth.keys.\"a b\"]\nkey = \"env:SLUICE_TEST_KEY_A\"\n")
            .rfind("auth.keys.a b@1", 0) == 0);
  CHECK(refused("[auth.keys.a]\nkey = \"env:SLUICE_TEST_KEY_A\"\n"
                "max_concurrent = 0\n")
            .rfind("auth.keys.a.max_concurrent@3", 0) == 0);
  CHECK(refused("[auth]\nallow_anonymous = true\n[auth.keys.a]\n"
                "key = \"env:SLUICE_TEST_KEY_A\"\n")
            .rfind("auth.allow_anonymous", 0) == 0);
  CHECK(refused("[auth]\nbogus = 1\n").rfind("auth.bogus@2", 0) == 0);
  CHECK(refused("[node]\nadmin_listen = \"nowhere\"\n")
            .rfind("node.admin_listen@2", 0) == 0);
  // A key from a file (one trailing newline dropped).
  auto path = std::string{"/tmp/sluice-key-"} + std::to_string(::getpid());
  {
    std::ofstream out{path};
    out << key_a << "\n";
  }
  auto cfg = parse_config("[auth.keys.a]\nkey = \"file:" + path +
                          "\"\n[sources.s]\ntype = \"simulated\"\n"
                          "[routes.\"/r\"]\nsources = [\"s\"]\n");
  std::remove(path.c_str());
  REQUIRE(cfg.node.auth.keys.size() == 1);
  CHECK(same_digest(cfg.node.auth.keys[0].digest, sha256(key_a)));
  CHECK(cfg.node.auth.keys[0].models == std::vector<std::string>{"*"});
}

TEST_CASE("auth: a client without a key is refused on its header - no "
          "100 Continue and no body read",
          "[node][auth]") {
  node_under_test node{keyed_config()};
  // A 1 MB body announced: the answer comes before any of it is sent.
  auto r = raw_exchange(node.port(),
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: 1000000\r\n"
                        "Expect: 100-continue\r\n\r\n");
  CHECK(r.status == 401);
  CHECK(code_of(r) == "invalid_api_key");
  // A large body sent at once behind a wrong key: the node drops it after
  // its answer instead of resetting the connection (which loses the 401).
  std::string body(1000000, ' ');
  body.front() = '{';
  body.back() = '}';
  auto big = raw_exchange(node.port(),
                          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          "Authorization: Bearer key-x-0123456789abcdef\r\n"
                          "Content-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(big.status == 401);
  // A key limited to some models must name one (the route's default
  // sources would serve any).
  auto none = exchange_with(node.port(), http::verb::post,
                            "/v1/chat/completions", R"({"messages":[]})",
                            bearer(key_a));
  CHECK(none.status == 400);
  CHECK(none.doc()["error"]["param"] == "model");
}

TEST_CASE("admin: with client keys and no admin key the main listener "
          "serves no operations - and /admin/ takes no cross-origin requests",
          "[node][auth][admin]") {
  set_keys();
  node_under_test keyed{R"toml(
[node]
access_log = "off"
[auth.keys.a]
key = "env:SLUICE_TEST_KEY_A"
[sources.s]
type = "simulated"
[routes."/r"]
sources = ["s"]
)toml"};
  auto st = exchange_with(keyed.port(), http::verb::get, "/status", "",
                          bearer(key_a));
  CHECK(st.status == 403);
  CHECK(code_of(st) == "permission_denied");
  node_under_test open{R"toml(
[node]
access_log = "off"
[sources.s]
type = "simulated"
[routes."/r"]
sources = ["s"]
)toml"};
  CHECK(exchange(open.port(), http::verb::get, "/status").status == 200);
  auto cross = exchange_with(open.port(), http::verb::post,
                             "/admin/breakers/s/isolate", "",
                             {{"Origin", "http://evil.example"}});
  CHECK(cross.status == 403);
  CHECK(open.rt->source("s").breaker.mirror->load().state ==
        policy::breaker_state::closed);
}
