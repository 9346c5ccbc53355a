#include "sluice/messages/errors.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/admission.hpp"

using namespace sluice;

TEST_CASE("tool_busy is JSON code -32016, HTTP 503") {
  auto info = describe(errc::tool_busy);
  CHECK(info.json_code == -32016);
  CHECK(info.http_status == 503);
  CHECK(info.name == "tool_busy");
}

TEST_CASE("every error has a distinct name and JSON code") {
  std::set<int> codes;
  std::set<std::string> names;
  auto all = all_errcs();
  CHECK(all.size() == 17);
  for (auto x : all) {
    CHECK(describe(x).name != "unknown"); // describe() knows every code
    codes.insert(describe(x).json_code);
    names.insert(to_string(x));
    auto type = describe(x).type;
    if (x == errc::rate_limited) {
      CHECK(type == "requests"); // OpenAI's type for its own 429s
      continue;
    }
    if (x == errc::insufficient_quota) {
      CHECK(type == "insufficient_quota"); // OpenAI's, code and type alike
      continue;
    }
    CHECK((type == "invalid_request_error" || type == "server_error"));
    CHECK((describe(x).http_status < 500) == (type == "invalid_request_error"));
  }
  CHECK(codes.size() == all.size());
  CHECK(names.size() == all.size());
  CHECK(describe(errc::unauthorized).http_status == 401);
  CHECK(to_string(errc::unauthorized) == "invalid_api_key");
  CHECK(describe(errc::rate_limited).http_status == 429);
  CHECK(to_string(errc::rate_limited) == "rate_limit_exceeded");
  CHECK(describe(errc::forbidden).http_status == 403);
  CHECK(describe(errc::model_not_found).http_status == 404);
  CHECK(describe(errc::bad_request).http_status == 400);
  CHECK(describe(errc::not_found).http_status == 404);
  CHECK(describe(errc::method_not_allowed).http_status == 405);
  CHECK(describe(errc::payload_too_large).http_status == 413);
  CHECK(describe(errc::headers_too_large).http_status == 431);
}

TEST_CASE("a tool_busy error names its tier") {
  for (auto k :
       {tier_kind::session, tier_kind::connection, tier_kind::global}) {
    auto err = tool_busy(k);
    CHECK(is(err, errc::tool_busy));
    REQUIRE(busy_tier(err));
    CHECK(*busy_tier(err) == k);
  }
  CHECK_FALSE(busy_tier(make_error(errc::bad_request)));
  CHECK_FALSE(busy_tier(caf::error{}));
}

TEST_CASE("registered errors render by name") {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  auto i = cfg.error_renderers.find(error_category);
  REQUIRE(i != cfg.error_renderers.end());
  auto err = tool_busy(tier_kind::global);
  auto text = i->second(err.code(), err.category(), err.context());
  CHECK(text.find("tool_busy") != std::string::npos);
  CHECK(text.find("global") != std::string::npos);
}

TEST_CASE("tier names round-trip") {
  CHECK(parse_tier_kind("connection") == tier_kind::connection);
  CHECK_FALSE(parse_tier_kind("planet"));
}

TEST_CASE("the README's error table lists every code") {
  std::ifstream in{SLUICE_SOURCE_DIR "/README.md"};
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  for (auto x : all_errcs()) {
    auto info = describe(x);
    auto row = "| `" + std::string{info.name} + "` | " +
               std::to_string(info.json_code) + " |";
    INFO(row);
    CHECK(text.str().find(row) != std::string::npos);
  }
}
