// What a web page can make the node do (issue 30, an outside red team's
// findings 2, 3 and 13), over real sockets on loopback: a page of another
// site, or one whose name was rebound to the node's address, gets no call
// served with the node's upstream credentials; allowed origins get CORS
// answers; a body cannot name a model twice by case; a key's rate counts
// /v1/models; operations take the admin key only in Authorization.

#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/config_file.hpp"
#include "test_upstream.hpp"

using namespace sluice;
using sluice::testing::node_under_test;
using sluice::testing::test_upstream;
using namespace sluice::testing::loopback;

namespace {

// One exchange on a fresh connection as a browser would send it: its own
// Host (the name the page used) and headers.
reply page_request(uint16_t port, http::verb method, const std::string& target,
                   const std::string& host, const header_list& headers,
                   const std::string& body = "",
                   const std::string& content_type = "text/plain") {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::error_code ec;
  stream.socket().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec)
    return {0, "connect failed: " + ec.message(), "", ""};
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, host);
  if (!body.empty())
    req.set(http::field::content_type, content_type);
  for (auto& [name, value] : headers)
    req.insert(name, value);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec)
    return {0, "write failed: " + ec.message(), "", ""};
  auto r = read_reply(stream, ioc);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return r;
}

std::string code_of(const reply& r) {
  auto doc = r.doc();
  if (!doc.is_object() || !doc.contains("error"))
    return "";
  return doc["error"]["code"].get<std::string>();
}

const std::string chat = R"({"model":"m","messages":[]})";

std::string sim_source(const std::string& extra_node = "") {
  return "[node]\naccess_log = \"off\"\n" + extra_node +
         "[sources.s]\ntype = \"simulated\"\n[[sources.s.phases]]\n"
         "latency_min_ms = 0\nlatency_max_ms = 0\n"
         "[routes.\"/v1/chat/completions\"]\nsources = [\"s\"]\n";
}

} // namespace

TEST_CASE("browser: a keyless node serves no call to another site's page nor "
          "to a rebound Host - the upstream is not asked",
          "[node][browser]") {
  // The red team's set-up: no client keys, loopback, an upstream that
  // gets the node's credentials (here it answers them back).
  test_upstream up;
  ::setenv("SLUICE_TEST_UPSTREAM_KEY", "Bearer sk-upstream-secret", 1);
  node_under_test node{"[node]\naccess_log = \"off\"\n"
                       "[sources.up]\ntype = \"http\"\nbase_url = \"" +
                       up.url("/auth") +
                       "\"\n[sources.up.headers]\n"
                       "Authorization = \"env:SLUICE_TEST_UPSTREAM_KEY\"\n"
                       "[routes.\"/v1/chat/completions\"]\n"
                       "sources = [\"up\"]\n"};
  auto p = node.port();
  auto here = "127.0.0.1:" + std::to_string(p);
  // A cross-site text/plain POST: no preflight, sent with the page's Origin.
  auto cross = page_request(p, http::verb::post, "/v1/chat/completions", here,
                            {{"Origin", "https://evil.example"}}, chat);
  CHECK(cross.status == 403);
  CHECK(code_of(cross) == "permission_denied");
  CHECK(cross.header("access-control-allow-origin").empty());
  // The same page after DNS rebinding: same-origin to itself.
  auto rebound_host = "rebind.evil.example:" + std::to_string(p);
  auto rebound =
      page_request(p, http::verb::post, "/v1/chat/completions", rebound_host,
                   {{"Origin", "http://" + rebound_host}}, chat);
  CHECK(rebound.status == 403);
  CHECK(code_of(rebound) == "permission_denied");
  CHECK(rebound.body.find("DNS rebinding") != std::string::npos);
  // A rebound page's GET carries no Origin at all.
  CHECK(
      page_request(p, http::verb::get, "/v1/models", rebound_host, {}).status ==
      403);
  // Its preflight too.
  auto pre = page_request(p, http::verb::options, "/v1/chat/completions", here,
                          {{"Origin", "https://evil.example"},
                           {"Access-Control-Request-Method", "POST"}});
  CHECK(pre.status == 403);
  CHECK(up.requests.load() == 0);
  CHECK(cross.body.find("sk-upstream-secret") == std::string::npos);
  CHECK(rebound.body.find("sk-upstream-secret") == std::string::npos);
  // Not a browser (no Origin, the address as Host): served as before.
  auto cli = page_request(p, http::verb::post, "/v1/chat/completions", here, {},
                          chat, "application/json");
  CHECK(cli.status == 200);
  CHECK(up.requests.load() == 1);
  // Neither is /healthz refused.
  CHECK(page_request(p, http::verb::get, "/healthz", rebound_host, {}).status ==
        200);
}

TEST_CASE("browser: allowed origins and hosts - preflight 204 with the CORS "
          "headers, answers readable by the page, streamed ones too",
          "[node][browser]") {
  node_under_test node{
      sim_source("allowed_origins = [\"http://localhost:3000\"]\n"
                 "allowed_hosts = [\"gateway.test\"]\n")};
  auto p = node.port();
  auto here = "localhost:" + std::to_string(p);
  const std::string app = "http://localhost:3000";
  auto pre = page_request(p, http::verb::options, "/v1/chat/completions", here,
                          {{"Origin", app},
                           {"Access-Control-Request-Method", "POST"},
                           {"Access-Control-Request-Headers",
                            "authorization,content-type,x-stainless-os"}});
  CHECK(pre.status == 204);
  CHECK(pre.body.empty());
  CHECK(pre.header("content-length").empty()); // RFC 9110 §8.6
  CHECK(pre.header("access-control-allow-origin") == app);
  CHECK(pre.header("access-control-allow-methods") == "GET, POST, OPTIONS");
  auto allowed = pre.header("access-control-allow-headers");
  for (auto h : {"Authorization", "Content-Type", "X-Session-Id",
                 "X-Request-Id", "x-stainless-os"})
    CHECK(allowed.find(h) != std::string::npos);
  CHECK(pre.header("access-control-max-age") == "600");
  CHECK(pre.header("vary").find("Origin") != std::string::npos);
  // The call itself: its answer names the origin.
  auto ok = page_request(p, http::verb::post, "/v1/chat/completions", here,
                         {{"Origin", app}}, chat, "application/json");
  CHECK(ok.status == 200);
  CHECK(ok.header("access-control-allow-origin") == app);
  CHECK(ok.header("vary") == "Origin");
  CHECK(ok.header("access-control-expose-headers").find("X-Request-Id") !=
        std::string::npos);
  // A stream's header too.
  auto streamed = page_request(
      p, http::verb::post, "/v1/chat/completions", here, {{"Origin", app}},
      R"({"model":"m","stream":true,"messages":[]})", "application/json");
  CHECK(streamed.status == 200);
  CHECK(streamed.content_type == "text/event-stream");
  CHECK(streamed.header("access-control-allow-origin") == app);
  // Another origin gets neither.
  auto other =
      page_request(p, http::verb::options, "/v1/chat/completions", here,
                   {{"Origin", "http://localhost:4000"},
                    {"Access-Control-Request-Method", "POST"}});
  CHECK(other.status == 403);
  CHECK(other.header("access-control-allow-origin").empty());
  // The node's own pages (the address it was opened at) need no entry.
  CHECK(page_request(p, http::verb::post, "/v1/chat/completions", here,
                     {{"Origin", "http://" + here}}, chat)
            .status == 200);
  // A browser sends the call on the preflight's connection: it stays open.
  stream_client c{p};
  net::write(c.stream.socket(),
             net::buffer("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: " +
                         here + "\r\nOrigin: " + app +
                         "\r\nAccess-Control-Request-Method: POST\r\n\r\n"
                         "POST /v1/chat/completions HTTP/1.1\r\nHost: " +
                         here + "\r\nOrigin: " + app + "\r\nContent-Length: " +
                         std::to_string(chat.size()) + "\r\n\r\n" + chat));
  CHECK(c.read_until("chat.completion"));
  CHECK(c.has("HTTP/1.1 204"));
  CHECK(c.has("HTTP/1.1 200"));
  // A listed name as Host is served; another name is not.
  CHECK(page_request(p, http::verb::post, "/v1/chat/completions",
                     "gateway.test:" + std::to_string(p), {}, chat)
            .status == 200);
  CHECK(page_request(p, http::verb::post, "/v1/chat/completions",
                     "other.test:" + std::to_string(p), {}, chat)
            .status == 403);
}

TEST_CASE("browser: node.allowed_hosts and node.allowed_origins are checked "
          "with key and line",
          "[node][browser][config]") {
  auto refused = [](const std::string& node_lines,
                    const std::string& rest = "") -> std::string {
    try {
      parse_config("[node]\n" + node_lines + rest +
                   "[sources.s]\ntype = \"simulated\"\n"
                   "[routes.\"/r\"]\nsources = [\"s\"]\n");
    } catch (const config_error& e) {
      return e.key() + "@" + std::to_string(e.line()) + ": " + e.what();
    }
    return "";
  };
  CHECK(refused("allowed_origins = [\"https://app.example/\"]\n")
            .rfind("node.allowed_origins@2", 0) == 0);
  CHECK(refused("allowed_origins = [\"app.example\"]\n")
            .find("SCHEME://HOST[:PORT]") != std::string::npos);
  // "*" lets any page call: only with client keys.
  auto star = refused("allowed_origins = [\"*\"]\n");
  CHECK(star.rfind("node.allowed_origins@2", 0) == 0);
  CHECK(star.find("auth.keys") != std::string::npos);
  ::setenv("SLUICE_TEST_BROWSER_KEY", "browser-key-0123456789", 1);
  CHECK(refused("allowed_origins = [\"*\"]\n",
                "[auth.keys.a]\nkey = \"env:SLUICE_TEST_BROWSER_KEY\"\n")
            .empty());
  CHECK(refused("allowed_hosts = [\"gateway.test:8080\"]\n")
            .rfind("node.allowed_hosts@2", 0) == 0);
  CHECK(refused("allowed_hosts = [\"*.example\"]\n")
            .rfind("node.allowed_hosts@2", 0) == 0);
  CHECK(refused("allowed_hosts = [1]\n").rfind("node.allowed_hosts@2", 0) == 0);
  auto cfg = parse_config("[node]\nallowed_hosts = [\"Gateway.Test\"]\n"
                          "allowed_origins = [\"HTTPS://App.Example:443\"]\n"
                          "[sources.s]\ntype = \"simulated\"\n"
                          "[routes.\"/r\"]\nsources = [\"s\"]\n");
  CHECK(cfg.node.allowed_hosts == std::vector<std::string>{"gateway.test"});
  CHECK(cfg.node.allowed_origins ==
        std::vector<std::string>{"https://app.example"});
}

namespace {

constexpr const char* browser_key = "browser-key-a-0123456789";
constexpr const char* browser_admin = "browser-admin-0123456789";

// Key a may use gpt-4o* models and makes 3 requests a minute.
std::string keyed() {
  ::setenv("SLUICE_TEST_BROWSER_KEY_A", browser_key, 1);
  ::setenv("SLUICE_TEST_BROWSER_ADMIN", browser_admin, 1);
  return R"toml(
[node]
access_log = "off"
[auth]
admin_key = "env:SLUICE_TEST_BROWSER_ADMIN"
  [auth.keys.a]
  key = "env:SLUICE_TEST_BROWSER_KEY_A"
  models = ["gpt-4o*"]
  requests_per_minute = 3
[sources.s]
type = "simulated"
  [[sources.s.phases]]
  latency_min_ms = 0
  latency_max_ms = 0
[routes."/v1/chat/completions"]
sources = ["s"]
  [routes."/v1/chat/completions".models]
  "gpt-4o" = ["s"]
  "gpt-5" = ["s"]
)toml";
}

header_list with_key() {
  return {{"Authorization", std::string{"Bearer "} + browser_key}};
}

} // namespace

TEST_CASE("browser: a model in another case cannot pass a key's models",
          "[node][browser][keys]") {
  // Issue 30, finding 3: "Model" reached an upstream that reads keys
  // case-insensitively, past a key limited to gpt-4o*.
  // (Three requests: the key's rate allows three a minute.)
  node_under_test node{keyed()};
  auto p = node.port();
  std::vector<std::string> messages;
  for (auto body : {R"({"model":"gpt-4o","Model":"gpt-5"})",
                    R"({"model":"gpt-4o","MODEL":"gpt-5"})",
                    R"({"model":"gpt-4o","model":"gpt-5"})"}) {
    INFO(body);
    auto r = exchange_with(p, http::verb::post, "/v1/chat/completions", body,
                           with_key());
    CHECK(r.status == 400);
    CHECK(code_of(r) == "bad_request");
    messages.push_back(r.doc()["error"]["message"].get<std::string>());
  }
  CHECK(messages[0].rfind("\"Model\" is \"model\" in another case", 0) == 0);
  CHECK(messages[1].rfind("\"MODEL\" is \"model\" in another case", 0) == 0);
  CHECK(messages[2] == "\"model\" is given twice");
}

TEST_CASE("browser: /v1/models spends a key's request rate",
          "[node][browser][keys]") {
  // Issue 30, finding 13: a listing is a request.
  node_under_test node{keyed()};
  auto p = node.port();
  for (int i = 0; i < 3; ++i)
    CHECK(exchange_with(p, http::verb::get, "/v1/models", "", with_key())
              .status == 200);
  auto r = exchange_with(p, http::verb::get, "/v1/models", "", with_key());
  CHECK(r.status == 429);
  CHECK(code_of(r) == "rate_limit_exceeded");
  CHECK(r.doc()["error"]["type"] == "requests");
  REQUIRE_FALSE(r.retry_after.empty());
  CHECK(std::stoi(r.retry_after) >= 19);
  CHECK(exchange_with(p, http::verb::get, "/v1/models/gpt-4o", "", with_key())
            .status == 429);
  // And a call after them.
  CHECK(exchange_with(p, http::verb::post, "/v1/chat/completions",
                      R"({"model":"gpt-4o"})", with_key())
            .status == 429);
}

TEST_CASE("browser: operations take the admin key only in Authorization",
          "[node][browser][admin]") {
  // Issue 30, finding 13: x-api-key carried it too.
  node_under_test node{keyed()};
  auto p = node.port();
  for (auto header : {"x-api-key", "api-key"}) {
    INFO(header);
    auto r = exchange_with(p, http::verb::get, "/status", "",
                           {{header, browser_admin}});
    CHECK(r.status == 401);
    CHECK(code_of(r) == "invalid_api_key");
    CHECK(r.doc()["error"]["message"].get<std::string>().find(
              "not as api-key or x-api-key") != std::string::npos);
  }
  CHECK(
      exchange_with(p, http::verb::get, "/status", "",
                    {{"Authorization", std::string{"Bearer "} + browser_admin}})
          .status == 200);
}
