// Who is asking, decided on the header alone: the key lookups are plain
// functions here, so no socket and no actor system is needed.

#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>
#include <catch2/catch.hpp>

#include "sluice/runtime/node/request_access.hpp"

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
  http::fields headers;

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

  access_verdict decide(std::string_view path) {
    return decide_access(path, headers, ctx);
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
  http::fields headers;
  headers.set(http::field::host, "127.0.0.1:8080");
  CHECK(decide_access("/status", headers, ctx).what == kind::allowed);
  // ...not to a page whose name was rebound to 127.0.0.1.
  headers.set(http::field::host, "attacker.example:8080");
  auto rebound = decide_access("/dashboard", headers, ctx);
  CHECK(rebound.what == kind::forbidden);
  CHECK(rebound.why.find("DNS rebinding") != std::string::npos);
  // Calls are not operations: their Host is not checked here.
  CHECK(decide_access("/v1/chat/completions", headers, ctx).what ==
        kind::allowed);
  // The admin listener serves names (scrapers use them).
  ctx.on_admin_listener = true;
  CHECK(decide_access("/metrics", headers, ctx).what == kind::allowed);
}

TEST_CASE_METHOD(fixture, "access: Basic credentials do not open /admin/") {
  // A browser sends cached credentials by itself: they read, never act.
  headers.set(http::field::authorization, "Basic YWRtaW46c2stYWRtaW4=");
  CHECK(decide("/admin/breakers/a/reset").what == kind::unauthorized);
  bearer("sk-admin");
  CHECK(decide("/admin/breakers/a/reset").what == kind::allowed);
}
