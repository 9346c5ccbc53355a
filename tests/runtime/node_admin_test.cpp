// Operations and the admin key (continued from node_auth_test.cpp): the
// admin listener, request ids and the access log, key references in the
// config, refusals on the header.

#include "node_auth_shared.hpp"

using namespace node_auth_test_support;

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
  CHECK(
      exchange_with(p, http::verb::get, "/metrics", "", bearer(admin)).status ==
      200);
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
  CHECK(exchange(ops, http::verb::post, "/admin/breakers/s/reset", "").status ==
        200);
  // Calls are for the main listener only.
  CHECK(exchange(ops, http::verb::post, "/r", "{}").status == 404);
  CHECK(exchange(main, http::verb::post, "/r", "{}").status == 200);
}

TEST_CASE("trace: X-Request-Id is taken when valid (else generated) and "
          "returned - the access log has one line per request with its fields",
          "[node][trace]") {
  auto log_path =
      std::string{"/tmp/sluice-access-"} + std::to_string(::getpid()) + ".log";
  std::remove(log_path.c_str());
  {
    node_under_test node{keyed_config(),
                         [&](file_config& c) { c.node.access_log = log_path; }};
    auto p = node.port();
    auto given =
        exchange_with(p, http::verb::post, "/v1/chat/completions", chat,
                      {{"Authorization", std::string{"Bearer "} + key_b},
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
  auto none =
      exchange_with(node.port(), http::verb::post, "/v1/chat/completions",
                    R"({"messages":[]})", bearer(key_a));
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
  auto cross =
      exchange_with(open.port(), http::verb::post, "/admin/breakers/s/isolate",
                    "", {{"Origin", "http://evil.example"}});
  CHECK(cross.status == 403);
  CHECK(open.rt->source("s").breaker.mirror->load().state ==
        policy::breaker_state::closed);
}
