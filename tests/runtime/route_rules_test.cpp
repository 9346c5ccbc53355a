// The rules of a route, checked once for the facade and the config reader:
// the field each refusal names, for every rule.

#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/runtime.hpp"
#include "sluice/runtime/route_rules.hpp"

using namespace sluice;

namespace {

bool known_kind(const std::string& k) {
  return k == "chat";
}

bool known_source(const std::string& s) {
  return s == "a" || s == "b";
}

// The field the route is refused for, "FIELD: problem", or "" if accepted.
std::string refusal(const route_config& r) {
  try {
    validate(r, known_kind, known_source);
  } catch (const field_error& e) {
    return e.field() + ": " + e.problem();
  }
  return "";
}

route_config route(std::vector<std::string> sources,
                   std::vector<double> weights = {}) {
  route_config r;
  r.name = "/r";
  r.sources = std::move(sources);
  r.weights = std::move(weights);
  return r;
}

} // namespace

TEST_CASE("a route of known sources and kind is accepted") {
  CHECK(refusal(route({"a"})).empty());
  CHECK(refusal(route({"a", "b"}, {3, 1})).empty());
  auto by_model = route({});
  by_model.models.push_back({"gpt-*", {"b"}, {}});
  CHECK(refusal(by_model).empty());
}

TEST_CASE("a route's kind and sources must exist") {
  auto r = route({"a"});
  r.kind = "poetry";
  CHECK(refusal(r) == "kind: unknown call kind 'poetry'");
  CHECK(refusal(route({"a", "zz"})) == "sources: unknown source 'zz'");
  CHECK(refusal(route({})) ==
        "sources: needs at least one source (or a models table)");
}

TEST_CASE("weights are one per source - positive and at most 1e6") {
  CHECK(refusal(route({"a", "b"}, {1})) ==
        "weights: needs one weight per source");
  CHECK(refusal(route({"a"}, {0})).rfind("weights: must be positive", 0) == 0);
  CHECK(refusal(route({"a"}, {-1})).rfind("weights: ", 0) == 0);
  CHECK(refusal(route({"a"}, {max_route_weight})).empty());
  CHECK(refusal(route({"a"}, {max_route_weight * 10})).rfind("weights: ", 0) ==
        0);
  auto nan = route({"a"}, {std::numeric_limits<double>::quiet_NaN()});
  CHECK(refusal(nan).rfind("weights: ", 0) == 0);
  auto by_model = route({}, {1});
  by_model.models.push_back({"m", {"a"}, {}});
  CHECK(refusal(by_model) == "weights: needs sources");
}

TEST_CASE("a model entry's list follows the same rules - named under its "
          "pattern") {
  auto r = route({"a"});
  r.models.push_back({"gpt-4o", {}, {}});
  CHECK(refusal(r) == "models.gpt-4o.sources: needs at least one source");
  r.models.back().sources = {"zz"};
  CHECK(refusal(r) == "models.gpt-4o.sources: unknown source 'zz'");
  r.models.back().sources = {"a"};
  r.models.back().weights = {1, 2};
  CHECK(refusal(r) == "models.gpt-4o.weights: needs one weight per source");
}
