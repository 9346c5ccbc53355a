// Which endpoint a request goes to, or the refusal instead: the dispatch
// of every path and method, without a connection.

#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/endpoint.hpp"
#include "sluice/runtime/node/responses.hpp"

using namespace sluice;
using namespace sluice::node;
namespace http = boost::beast::http;

namespace {

// A node with one call route, /v1/chat/completions.
struct fixture {
  bool admin = false;

  endpoint_choice choose(std::string_view target,
                         http::verb method = http::verb::get) {
    return choose_endpoint(target, method, admin, [](const std::string& p) {
      return p == "/v1/chat/completions";
    });
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "endpoint: each operations path") {
  auto h = choose("/healthz");
  CHECK_FALSE(h.error);
  CHECK(h.to == endpoint::healthz);
  CHECK(choose("/status").to == endpoint::status);
  CHECK(choose("/events").to == endpoint::events);
  CHECK(choose("/metrics?x=1").to == endpoint::metrics);
  auto a = choose("/admin/breakers/s/reset", http::verb::post);
  CHECK_FALSE(a.error);
  CHECK(a.to == endpoint::admin_action);
  CHECK(a.arg == "breakers/s/reset");
}

TEST_CASE_METHOD(fixture, "endpoint: a wrong method is 405 with its usage") {
  auto h = choose("/healthz", http::verb::post);
  REQUIRE(h.error);
  CHECK(*h.error == errc::method_not_allowed);
  CHECK(h.why == "use GET /healthz");
  auto a = choose("/admin/breakers/s/reset");
  REQUIRE(a.error);
  CHECK(a.why == "use POST on /admin/reload or /admin/breakers/SOURCE/ACTION");
  auto m = choose("/v1/models", http::verb::post);
  REQUIRE(m.error);
  CHECK(m.why == "use GET /v1/models");
  auto c = choose("/v1/chat/completions");
  REQUIRE(c.error);
  CHECK(*c.error == errc::method_not_allowed);
  CHECK(c.why == "use POST on a call route");
}

TEST_CASE_METHOD(fixture, "endpoint: the models list and one model") {
  auto all = choose("/v1/models");
  CHECK_FALSE(all.error);
  CHECK(all.to == endpoint::models);
  CHECK(all.arg.empty());
  CHECK(choose("/v1/models/").arg.empty());
  auto one = choose("/v1/models/meta-llama%2FLlama-3");
  CHECK(one.to == endpoint::models);
  CHECK(one.arg == "meta-llama/Llama-3");
  auto bad = choose("/v1/models/%zz");
  REQUIRE(bad.error);
  CHECK(*bad.error == errc::bad_request);
  CHECK(bad.why == "malformed model id");
}

TEST_CASE_METHOD(fixture, "endpoint: a call route and an unknown path") {
  auto c = choose("http://node/v1/chat/completions?q", http::verb::post);
  CHECK_FALSE(c.error);
  CHECK(c.to == endpoint::call);
  CHECK(c.arg == "/v1/chat/completions");
  auto miss = choose("/nowhere", http::verb::post);
  REQUIRE(miss.error);
  CHECK(*miss.error == errc::not_found);
  CHECK(miss.why == "no route /nowhere");
  auto long_miss = choose("/" + std::string(300, 'x'), http::verb::post);
  CHECK(long_miss.why.size() == 9 + max_echoed_path_bytes + 3);
}

TEST_CASE_METHOD(fixture, "endpoint: a target that is no path is 400") {
  auto star = choose("*", http::verb::options);
  REQUIRE(star.error);
  CHECK(*star.error == errc::bad_request);
  CHECK(star.why.find("origin-form") != std::string::npos);
}

TEST_CASE_METHOD(fixture, "endpoint: the admin listener serves no calls") {
  admin = true;
  CHECK(choose("/status").to == endpoint::status);
  CHECK(choose("/healthz").to == endpoint::healthz);
  for (auto target : {"/v1/models", "/v1/chat/completions", "/nowhere"}) {
    auto r = choose(target, http::verb::post);
    REQUIRE(r.error);
    CHECK(*r.error == errc::not_found);
    CHECK(r.why.find("calls go to node.listen") != std::string::npos);
  }
}

TEST_CASE_METHOD(fixture, "endpoint: the dashboard and its files") {
  auto page = choose("/dashboard");
  CHECK(page.to == endpoint::dashboard);
  CHECK(page.arg.empty());
  CHECK(choose("/dashboard/").arg.empty());
  auto script = choose("/dashboard/app.js");
  CHECK(script.to == endpoint::dashboard);
  CHECK(script.arg == "app.js");
  auto posted = choose("/dashboard", http::verb::post);
  REQUIRE(posted.error);
  CHECK(*posted.error == errc::method_not_allowed);
  admin = true; // served on the admin listener too
  CHECK(choose("/dashboard").to == endpoint::dashboard);
}
