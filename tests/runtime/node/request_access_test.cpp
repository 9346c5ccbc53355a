// Who is asking, decided on the header alone: the key lookups are plain
// functions here, so no socket and no actor system is needed.

#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/field.hpp>
#include <catch2/catch.hpp>

#include "sluice/runtime/node/request_access.hpp"
#include "sluice/runtime/policy/host_port.hpp"

using namespace sluice;
using namespace sluice::node;
namespace http = boost::beast::http;

namespace {

using kind = access_verdict::kind;

// A node with one client key ("sk-alice") and an admin key ("sk-admin"),
// its main listener on loopback.
struct fixture {
  client_key alice{make_config("alice"), tier_handle{}, time_point{}};
  access_context ctx;
  sluice::http_fields headers;

  fixture() {
    ctx.main_listener_loopback = true;
    ctx.admin_key_configured = true;
    ctx.client_keys_configured = true;
    ctx.is_admin_key = [](std::string_view t) { return t == "sk-admin"; };
    ctx.find_key = [this](std::string_view t) {
      return t == "sk-alice" ? &alice : nullptr;
    };
  }

  static client_key_config make_config(std::string name) {
    client_key_config cfg;
    cfg.name = std::move(name);
    return cfg;
  }

  access_verdict decide(std::string_view path,
                        http::verb method = http::verb::post) {
    return decide_access(method, path, headers, ctx);
  }

  void bearer(const std::string& token) {
    headers.set(http::field::authorization, "Bearer " + token);
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "access: the operations paths") {
  CHECK(is_operations_path("/status"));
  CHECK(is_operations_path("/metrics"));
  CHECK(is_operations_path("/events"));
  CHECK(is_operations_path("/admin/breakers/a/reset"));
  CHECK_FALSE(is_operations_path("/admin"));
  CHECK_FALSE(is_operations_path("/healthz"));
  CHECK_FALSE(is_operations_path("/v1/models"));
  CHECK_FALSE(is_operations_path("/statusx"));
}

TEST_CASE_METHOD(fixture, "access: /healthz needs no key") {
  auto v = decide("/healthz");
  CHECK(v.what == kind::allowed);
  CHECK(v.key == nullptr);
}

TEST_CASE_METHOD(fixture, "access: a call needs a known client key") {
  auto none = decide("/v1/chat/completions");
  CHECK(none.what == kind::unauthorized);
  CHECK(none.why.find("You didn't provide an API key") == 0);
  headers.set(http::field::authorization, "Basic eA==");
  auto malformed = decide("/v1/chat/completions");
  CHECK(malformed.what == kind::unauthorized);
  CHECK(malformed.why.find("Malformed API key header") == 0);
  bearer("sk-mallory");
  auto wrong = decide("/v1/chat/completions");
  CHECK(wrong.what == kind::unauthorized);
  CHECK(wrong.why == "Incorrect API key provided");
  bearer("sk-alice");
  auto ok = decide("/v1/models");
  CHECK(ok.what == kind::allowed);
  CHECK(ok.why.empty());
  CHECK(ok.key == &alice);
}

TEST_CASE_METHOD(fixture, "access: without client keys a call is anonymous") {
  ctx.client_keys_configured = false;
  bearer("sk-alice"); // ignored: SDKs always send one
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::allowed);
  CHECK(v.key == nullptr);
}

TEST_CASE_METHOD(fixture, "access: the admin listener lets calls through") {
  // The router answers them 404; no key is asked for.
  ctx.on_admin_listener = true;
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::allowed);
  CHECK(v.key == nullptr);
}

TEST_CASE_METHOD(fixture, "access: operations need the admin key") {
  auto none = decide("/status");
  CHECK(none.what == kind::unauthorized);
  CHECK(none.why == "this endpoint needs the admin key "
                    "(Authorization: Bearer ADMIN_KEY, or as the password "
                    "of Basic credentials)");
  bearer("sk-alice"); // a client key is no admin key
  auto wrong = decide("/metrics");
  CHECK(wrong.what == kind::unauthorized);
  CHECK(wrong.why == "incorrect admin key");
  bearer("sk-admin");
  auto ok = decide("/admin/breakers/a/reset");
  CHECK(ok.what == kind::allowed);
  CHECK(ok.key == nullptr);
}

TEST_CASE_METHOD(fixture, "access: /admin/ refuses a cross-origin request") {
  bearer("sk-admin");
  headers.set(http::field::origin, "https://example.com");
  auto v = decide("/admin/breakers/a/isolate");
  CHECK(v.what == kind::forbidden);
  CHECK(v.why.find("cross-origin") != std::string::npos);
  // Reading is harmless: /status takes an Origin.
  CHECK(decide("/status").what == kind::allowed);
}

TEST_CASE_METHOD(fixture, "access: operations not served on this listener") {
  ctx.admin_key_configured = false;
  auto keys = decide("/status");
  CHECK(keys.what == kind::forbidden);
  CHECK(keys.why.find("set auth.admin_key or node.admin_listen") !=
        std::string::npos);
  ctx.admin_listener_configured = true;
  auto elsewhere = decide("/events");
  CHECK(elsewhere.what == kind::forbidden);
  CHECK(elsewhere.why == "operations are served on node.admin_listen");
  ctx.on_admin_listener = true;
  CHECK(decide("/events").what == kind::allowed);
}

TEST_CASE_METHOD(fixture, "access: loopback without any key serves ops") {
  ctx.admin_key_configured = false;
  ctx.client_keys_configured = false;
  CHECK(decide("/status").what == kind::allowed);
  ctx.main_listener_loopback = false;
  CHECK(decide("/status").what == kind::forbidden);
}

TEST_CASE_METHOD(fixture, "access: the dashboard is an operations path") {
  CHECK(is_operations_path("/dashboard"));
  CHECK(is_operations_path("/dashboard/app.js"));
  CHECK(is_dashboard_path("/dashboard/"));
  CHECK_FALSE(is_dashboard_path("/dashboards"));
  CHECK_FALSE(is_operations_path("/dashboardx"));
  CHECK(decide("/dashboard").what == kind::unauthorized);
  bearer("sk-alice"); // a client key opens no operations endpoint
  CHECK(decide("/dashboard").what == kind::unauthorized);
  bearer("sk-admin");
  CHECK(decide("/dashboard/app.css").what == kind::allowed);
}

TEST_CASE("access: a Basic credential's password") {
  // "admin:sk-admin", "x:p", ":k" (no user), with and without padding.
  CHECK(basic_password("Basic YWRtaW46c2stYWRtaW4=") == "sk-admin");
  CHECK(basic_password("basic eDpw") == "p");
  CHECK(basic_password("BASIC   Oms=  ") == "k");
  CHECK(basic_password("Basic dTpwYXNzd29yZA==") == "password");
  // A password may hold colons: only the first one splits.
  CHECK(basic_password("Basic dTphOmI=") == "a:b");
  // Not Basic, not base64, no colon, an empty password.
  CHECK_FALSE(basic_password("Bearer YWRtaW46c2stYWRtaW4="));
  CHECK_FALSE(basic_password("Basic"));
  CHECK_FALSE(basic_password("Basic "));
  CHECK_FALSE(basic_password("Basic YWRtaW46c2stYWRtaW4")); // length 23
  CHECK_FALSE(basic_password("Basic YW=taW46"));             // '=' inside
  CHECK_FALSE(basic_password("Basic YWRt*W46"));             // '*'
  CHECK_FALSE(basic_password("Basic YWRtaW4="));             // "admin"
  CHECK_FALSE(basic_password("Basic dTo="));                 // "u:"
  CHECK_FALSE(basic_password("Basic ===="));
  CHECK_FALSE(basic_password("Basic a==="));
}

TEST_CASE_METHOD(fixture, "access: Basic credentials carry the admin key") {
  headers.set(http::field::authorization, "Basic YWRtaW46c2stYWRtaW4=");
  CHECK(decide("/dashboard").what == kind::allowed);
  CHECK(decide("/status").what == kind::allowed);
  CHECK(decide("/events").what == kind::allowed);
  // A wrong password is a wrong key.
  headers.set(http::field::authorization, "Basic YWRtaW46bm9wZQ=="); // admin:nope
  auto wrong = decide("/status");
  CHECK(wrong.what == kind::unauthorized);
  CHECK(wrong.why == "incorrect admin key");
  // Calls take no Basic credentials: a client key is sent as Bearer.
  headers.set(http::field::authorization, "Basic YTpzay1hbGljZQ=="); // a:sk-alice
  CHECK(decide("/v1/chat/completions").what == kind::unauthorized);
}

TEST_CASE("access: a Host that is an address or localhost") {
  for (auto ok : {"127.0.0.1", "127.0.0.1:8080", "localhost", "LocalHost:80",
                  "[::1]", "[::1]:8080", "10.1.2.3:65535"})
    CHECK(is_address_host(ok));
  for (auto bad : {"evil.example", "evil.example:8080", "127.0.0.1.nip.io",
                   "localhost.", "[::1", "[::1]x", "[evil]:80", "127.0.0.1:",
                   "127.0.0.1:80a", "127.0.0.1:123456", "::1", ""})
    CHECK_FALSE(is_address_host(bad));
}

TEST_CASE("access: keyless operations refuse a rebound Host name") {
  // A loopback node without keys: /status is open to its own addresses...
  access_context ctx;
  ctx.main_listener_loopback = true;
  sluice::http_fields headers;
  headers.set(http::field::host, "127.0.0.1:8080");
  CHECK(decide_access(http::verb::get, "/status", headers, ctx).what ==
        kind::allowed);
  // ...not to a page whose name was rebound to 127.0.0.1.
  headers.set(http::field::host, "attacker.example:8080");
  auto rebound = decide_access(http::verb::get, "/dashboard", headers, ctx);
  CHECK(rebound.what == kind::forbidden);
  CHECK(rebound.why.find("DNS rebinding") != std::string::npos);
  // Calls served without a key are refused to it as well (issue 30,
  // finding 2: they spend the node's upstream credentials).
  CHECK(decide_access(http::verb::post, "/v1/chat/completions", headers, ctx)
            .what == kind::forbidden);
  // Nor on the admin listener: a page rebound to its address would read
  // /status and /metrics (a GET to its own origin sends no Origin).
  ctx.on_admin_listener = true;
  ctx.admin_listener_configured = true;
  CHECK(decide_access(http::verb::get, "/metrics", headers, ctx).what ==
        kind::forbidden);
  // A scraper that uses a name gets it listed.
  std::vector<std::string> names{"attacker.example"};
  ctx.allowed_hosts = &names;
  CHECK(decide_access(http::verb::get, "/metrics", headers, ctx).what ==
        kind::allowed);
}

TEST_CASE_METHOD(fixture, "access: Basic credentials do not open /admin/") {
  // A browser sends cached credentials by itself: they read, never act.
  headers.set(http::field::authorization, "Basic YWRtaW46c2stYWRtaW4=");
  CHECK(decide("/admin/breakers/a/reset").what == kind::unauthorized);
  bearer("sk-admin");
  CHECK(decide("/admin/breakers/a/reset").what == kind::allowed);
}

namespace {

// A developer's node: loopback, no keys at all (issue 30, finding 2: the
// default of a local gateway), its browser settings as given.
struct keyless_node {
  std::vector<std::string> hosts;
  std::vector<std::string> origins;
  access_context ctx;
  sluice::http_fields headers;

  keyless_node() {
    ctx.main_listener_loopback = true;
    ctx.allowed_hosts = &hosts;
    ctx.allowed_origins = &origins;
    headers.set(http::field::host, "127.0.0.1:8080");
  }

  access_verdict decide(std::string_view path,
                        http::verb method = http::verb::post) {
    return decide_access(method, path, headers, ctx);
  }

  void preflight(const std::string& origin) {
    headers.set(http::field::origin, origin);
    headers.set(http::field::access_control_request_method, "POST");
  }
};

} // namespace

TEST_CASE_METHOD(keyless_node,
                 "access: a keyless call from another site's page is 403") {
  // The red team's request: a cross-site text/plain POST (no preflight).
  headers.set(http::field::origin, "https://evil.example");
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::forbidden);
  CHECK(v.why.find("Origin: https://evil.example") != std::string::npos);
  CHECK(v.why.find("node.allowed_origins") != std::string::npos);
  CHECK(decide("/v1/models", http::verb::get).what == kind::forbidden);
  // "null" (a sandboxed frame, a file) and two Origins are foreign too.
  headers.set(http::field::origin, "null");
  CHECK(decide("/v1/embeddings").what == kind::forbidden);
  headers.set(http::field::origin, "http://127.0.0.1:8080");
  headers.insert(http::field::origin, "http://127.0.0.1:8080");
  CHECK(decide("/v1/embeddings").what == kind::forbidden);
  // No Origin (curl, an SDK): served, nothing to mark.
  headers.erase(http::field::origin);
  auto plain = decide("/v1/chat/completions");
  CHECK(plain.what == kind::allowed);
  CHECK(plain.allow_origin.empty());
}

TEST_CASE_METHOD(keyless_node,
                 "access: a keyless call to a rebound Host name is 403") {
  headers.set(http::field::host, "rebind.evil.example:8080");
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::forbidden);
  CHECK(v.why.find("DNS rebinding") != std::string::npos);
  CHECK(v.why.find("\"rebind.evil.example:8080\"") != std::string::npos);
  // Its own origin is its Host: the Host is checked first.
  headers.set(http::field::origin, "http://rebind.evil.example:8080");
  CHECK(decide("/v1/chat/completions").what == kind::forbidden);
  // A configured name is served, in any case, with any port.
  hosts = {"gateway.internal"};
  headers.erase(http::field::origin);
  headers.set(http::field::host, "Gateway.Internal:8080");
  CHECK(decide("/v1/chat/completions").what == kind::allowed);
  headers.set(http::field::host, "gateway.internal.evil.example");
  CHECK(decide("/v1/chat/completions").what == kind::forbidden);
  // Addresses and localhost need no entry.
  for (auto ok : {"localhost:8080", "[::1]:8080", "10.0.0.7"}) {
    headers.set(http::field::host, ok);
    CHECK(decide("/v1/chat/completions").what == kind::allowed);
  }
}

TEST_CASE_METHOD(keyless_node,
                 "access: the node's own origin and listed origins call") {
  // A page the node served itself (http:// + its Host), in any spelling.
  for (auto own : {"http://127.0.0.1:8080", "HTTP://127.0.0.1:8080"}) {
    headers.set(http::field::origin, own);
    auto v = decide("/v1/chat/completions");
    CHECK(v.what == kind::allowed);
    CHECK(v.allow_origin.empty()); // same origin: nothing to allow
  }
  headers.set(http::field::host, "localhost:8080");
  headers.set(http::field::origin, "http://localhost:8080");
  CHECK(decide("/v1/chat/completions").what == kind::allowed);
  // Another port of the same host is another origin.
  headers.set(http::field::origin, "http://localhost:3000");
  CHECK(decide("/v1/chat/completions").what == kind::forbidden);
  // Listed: served, and its page may read the answer.
  origins = {"http://localhost:3000"};
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::allowed);
  CHECK(v.allow_origin == "http://localhost:3000");
  // "*" opens nothing without a key: the page would spend the node's
  // upstream credentials.
  origins = {"*"};
  headers.set(http::field::origin, "https://evil.example");
  CHECK(decide("/v1/chat/completions").what == kind::forbidden);
}

TEST_CASE_METHOD(keyless_node, "access: CORS preflights") {
  origins = {"https://app.example"};
  preflight("https://app.example");
  auto ok = decide("/v1/chat/completions", http::verb::options);
  CHECK(ok.what == kind::preflight);
  CHECK(ok.allow_origin == "https://app.example");
  preflight("https://evil.example");
  auto foreign = decide("/v1/chat/completions", http::verb::options);
  CHECK(foreign.what == kind::forbidden);
  CHECK(foreign.why.find("node.allowed_origins") != std::string::npos);
  // Operations take none, from any origin.
  preflight("https://app.example");
  CHECK(decide("/status", http::verb::options).what == kind::forbidden);
  CHECK(decide("/admin/breakers/a/reset", http::verb::options).what ==
        kind::forbidden);
  // A rebound name is refused before the origin is looked at.
  headers.set(http::field::host, "rebind.evil.example");
  CHECK(decide("/v1/chat/completions", http::verb::options).what ==
        kind::forbidden);
  // An OPTIONS that is no preflight goes to the router (405).
  headers.set(http::field::host, "127.0.0.1:8080");
  headers.erase(http::field::access_control_request_method);
  headers.erase(http::field::origin);
  CHECK(decide("/v1/chat/completions", http::verb::options).what ==
        kind::allowed);
}

TEST_CASE_METHOD(fixture, "access: with client keys a key is the credential") {
  // A keyed call from any origin or Host is served: the page had the key.
  headers.set(http::field::host, "gateway.example.com");
  headers.set(http::field::origin, "https://evil.example");
  bearer("sk-alice");
  auto v = decide("/v1/chat/completions");
  CHECK(v.what == kind::allowed);
  CHECK(v.key == &alice);
  CHECK(v.allow_origin.empty()); // not listed: its page cannot read it
  std::vector<std::string> origins{"*"};
  ctx.allowed_origins = &origins;
  CHECK(decide("/v1/chat/completions").allow_origin == "https://evil.example");
  // Without the key it is a 401, as before; readable by an allowed
  // origin's page (it shows why), not by another's.
  headers.erase(http::field::authorization);
  auto no_key = decide("/v1/chat/completions");
  CHECK(no_key.what == kind::unauthorized);
  CHECK(no_key.allow_origin == "https://evil.example");
  origins = {"https://app.example"};
  CHECK(decide("/v1/chat/completions").allow_origin.empty());
  origins = {"*"};
  // Preflights carry no key: "*" answers them when keys are configured.
  headers.set(http::field::access_control_request_method, "POST");
  auto pre = decide("/v1/chat/completions", http::verb::options);
  CHECK(pre.what == kind::preflight);
  CHECK(pre.allow_origin == "https://evil.example");
}

TEST_CASE_METHOD(keyless_node,
                 "access: keyless operations refuse another site's page") {
  headers.set(http::field::origin, "https://evil.example");
  CHECK(decide("/status", http::verb::get).what == kind::forbidden);
  CHECK(decide("/metrics", http::verb::get).why.find("auth.admin_key") !=
        std::string::npos);
  headers.set(http::field::origin, "http://127.0.0.1:8080");
  CHECK(decide("/status", http::verb::get).what == kind::allowed);
}

TEST_CASE("access: CORS headers of an answer and of a preflight") {
  sluice::http_fields res;
  set_cors_headers(res, "https://app.example");
  CHECK(res[http::field::access_control_allow_origin] == "https://app.example");
  CHECK(res[http::field::vary] == "Origin");
  sluice::http_fields req;
  req.set(http::field::access_control_request_headers,
          "x-stainless-os, openai-beta");
  sluice::http_fields pre;
  set_preflight_headers(pre, "https://app.example", req);
  CHECK(pre[http::field::access_control_allow_origin] == "https://app.example");
  CHECK(pre[http::field::access_control_allow_methods] == "GET, POST, OPTIONS");
  auto allowed = std::string{pre[http::field::access_control_allow_headers]};
  for (auto h : {"Authorization", "Content-Type", "X-Session-Id",
                 "X-Request-Id", "x-stainless-os, openai-beta"})
    CHECK(allowed.find(h) != std::string::npos);
  CHECK(pre[http::field::access_control_max_age] == "600");
  CHECK(std::string{pre[http::field::vary]}.rfind("Origin", 0) == 0);
  // Asked-for names that are not plain tokens are not echoed.
  req.set(http::field::access_control_request_headers, "x\r\ny");
  sluice::http_fields odd;
  set_preflight_headers(odd, "https://app.example", req);
  CHECK(std::string{odd[http::field::access_control_allow_headers]} ==
        cors_allowed_headers);
}

TEST_CASE_METHOD(fixture, "access: operations take the admin key only in "
                          "Authorization") {
  // Issue 30, finding 13: x-api-key / api-key carried it too.
  headers.set("x-api-key", "sk-admin");
  auto v = decide("/status", http::verb::get);
  CHECK(v.what == kind::unauthorized);
  CHECK(v.why.find("not as api-key or x-api-key") != std::string::npos);
  headers.erase("x-api-key");
  headers.set("api-key", "sk-admin");
  CHECK(decide("/admin/breakers/a/reset").what == kind::unauthorized);
  bearer("sk-admin"); // with Authorization, the other header is not read
  CHECK(decide("/status", http::verb::get).what == kind::allowed);
}

TEST_CASE("access: known hosts and normal origins") {
  std::vector<std::string> names{"gateway.internal"};
  CHECK(is_known_host("gateway.internal", names));
  CHECK(is_known_host("GATEWAY.internal:1", names));
  CHECK(is_known_host("127.0.0.1:8080", names));
  CHECK_FALSE(is_known_host("internal", names));
  CHECK_FALSE(is_known_host("gateway.internal.", names));
  CHECK_FALSE(is_known_host("[gateway.internal]", names));
  CHECK_FALSE(is_known_host("gateway.internal", {}));
  CHECK(normal_origin("http://127.0.0.1:8080") == "http://127.0.0.1:8080");
  CHECK(normal_origin("HTTPS://App.Example:443") == "https://app.example");
  CHECK(normal_origin("http://app.example:80") == "http://app.example");
  CHECK(normal_origin("http://[::1]:8080") == "http://[::1]:8080");
  CHECK(normal_origin("chrome-extension://abcdef") ==
        "chrome-extension://abcdef");
  for (auto bad : {"null", "", "http://", "http://a/", "http://a/p",
                   "http://u@a", "http://a?q", "http://::1", "//a", "1http://a",
                   "http://a:99999", "http://[::1"})
    CHECK_FALSE(normal_origin(bad));
}
