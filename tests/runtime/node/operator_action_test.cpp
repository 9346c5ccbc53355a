// An operator's breaker action, read from its path.

#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/operator_action.hpp"

using namespace sluice;
using namespace sluice::node;

namespace {

struct fixture {
  static operator_action parse(std::string_view rest) {
    return parse_operator_action(rest);
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "operator action: reset and isolate") {
  auto r = parse("breakers/openai/reset");
  CHECK_FALSE(r.error);
  CHECK(r.source == "openai");
  CHECK(r.action == breaker_action::reset);
  CHECK(r.action_name == "reset");
  auto i = parse("breakers/us%2Feast/isolate");
  CHECK_FALSE(i.error);
  CHECK(i.source == "us/east");
  CHECK(i.action == breaker_action::isolate);
}

TEST_CASE_METHOD(fixture, "operator action: unknown paths are 404") {
  for (auto rest : {"", "breakers", "breakers/", "breakers/x", "other/x/y"}) {
    auto r = parse(rest);
    REQUIRE(r.error);
    CHECK(*r.error == errc::not_found);
    CHECK(r.why.find("no admin action ") == 0);
  }
  auto verb = parse("breakers/openai/open");
  REQUIRE(verb.error);
  CHECK(*verb.error == errc::not_found);
  CHECK(verb.why == "no breaker action open (reset or isolate)");
}

TEST_CASE_METHOD(fixture, "operator action: a malformed source is 400") {
  for (auto rest : {"breakers//reset", "breakers/%zz/reset"}) {
    auto r = parse(rest);
    REQUIRE(r.error);
    CHECK(*r.error == errc::bad_request);
    CHECK(r.why == "malformed source name");
  }
  // The source is checked before the action.
  auto both = parse("breakers/%zz/open");
  REQUIRE(both.error);
  CHECK(*both.error == errc::bad_request);
}
