#include "sluice/runtime/policy/config_diff.hpp"

#include <catch2/catch.hpp>

using namespace sluice::policy;

using names = std::vector<std::string>;

TEST_CASE("diff_named sorts names into kept, added, replaced and removed",
          "[config_diff]") {
  fingerprints before{{"a", "1"}, {"b", "2"}, {"c", "3"}};
  fingerprints after{{"a", "1"}, {"b", "2 changed"}, {"d", "4"}};
  auto d = diff_named(before, after);
  CHECK(d.kept == names{"a"});
  CHECK(d.replaced == names{"b"});
  CHECK(d.added == names{"d"});
  CHECK(d.removed == names{"c"});
  CHECK_FALSE(d.unchanged());
  CHECK(diff_named(before, before).unchanged());
  CHECK(diff_named(before, before).kept == names{"a", "b", "c"});
}

TEST_CASE("diff_named of empty sets", "[config_diff]") {
  CHECK(diff_named({}, {}).unchanged());
  CHECK(diff_named({}, {{"x", ""}}).added == names{"x"});
  CHECK(diff_named({{"x", ""}}, {}).removed == names{"x"});
}

TEST_CASE("a route naming a replaced source is replaced, even unchanged",
          "[config_diff]") {
  source_prints sources_before{
      {"s1", {"a", ""}}, {"s2", {"b", ""}}, {"s3", {"c", ""}}};
  source_prints sources_after{
      {"s1", {"a", ""}}, {"s2", {"b changed", ""}}, {"s3", {"c", ""}}};
  fingerprints routes{{"/one", "r1"}, {"/two", "r2"}, {"/three", "r3"}};
  std::map<std::string, std::vector<std::string>> uses{
      {"/one", {"s1"}}, {"/two", {"s1", "s2"}}, {"/three", {"s3"}}};
  auto d = plan_reload(sources_before, sources_after, routes, routes, uses);
  CHECK(d.sources.replaced == names{"s2"});
  CHECK(d.sources.kept == names{"s1", "s3"});
  CHECK(d.routes.kept == names{"/one", "/three"});
  CHECK(d.routes.replaced == names{"/two"});
  CHECK(d.routes.added.empty());
  CHECK(d.routes.removed.empty());
}

TEST_CASE("a route's own change replaces it once, whatever its sources do",
          "[config_diff]") {
  source_prints sources_before{{"s1", {"a", ""}}};
  source_prints sources_after{{"s1", {"a2", ""}}};
  fingerprints routes_before{{"/a", "1"}, {"/b", "2"}};
  fingerprints routes_after{{"/a", "1 changed"}, {"/c", "3"}};
  std::map<std::string, std::vector<std::string>> uses{{"/a", {"s1"}},
                                                        {"/c", {"s1"}}};
  auto d = plan_reload(sources_before, sources_after, routes_before,
                       routes_after, uses);
  CHECK(d.routes.replaced == names{"/a"}); // not twice
  CHECK(d.routes.added == names{"/c"});
  CHECK(d.routes.removed == names{"/b"});
  CHECK(d.routes.kept.empty());
}

TEST_CASE("removed and added sources leave routes that do not name them",
          "[config_diff]") {
  source_prints sources_before{{"old", {"x", ""}}, {"s", {"y", "t"}}};
  source_prints sources_after{{"new", {"z", ""}}, {"s", {"y", "t"}}};
  fingerprints routes{{"/r", "1"}};
  std::map<std::string, std::vector<std::string>> uses{{"/r", {"s"}}};
  auto d = plan_reload(sources_before, sources_after, routes, routes, uses);
  CHECK(d.sources.removed == names{"old"});
  CHECK(d.sources.added == names{"new"});
  CHECK(d.routes.kept == names{"/r"});
  CHECK(d.routes.unchanged());
}

TEST_CASE("a source whose own settings alone changed is tuned, and routes "
          "naming it are rebuilt",
          "[config_diff]") {
  source_prints before{{"s", {"url", "breaker 0.5"}}, {"t", {"url2", "x"}}};
  source_prints after{{"s", {"url", "breaker 0.9"}}, {"t", {"url3", "y"}}};
  auto d = diff_sources(before, after);
  CHECK(d.tuned == names{"s"});
  CHECK(d.replaced == names{"t"}); // the upstream changed: replaced
  CHECK(d.kept.empty());
  CHECK_FALSE(d.unchanged());
  fingerprints routes{{"/s", "1"}, {"/none", "2"}};
  std::map<std::string, std::vector<std::string>> uses{{"/s", {"s"}},
                                                        {"/none", {}}};
  auto r = plan_reload(before, after, routes, routes, uses);
  CHECK(r.routes.replaced == names{"/s"});
  CHECK(r.routes.kept == names{"/none"});
}

TEST_CASE("keeps_built_route: only a kept, running route holding no changed source") {
  CHECK(sluice::policy::keeps_built_route(true, true, false));
  CHECK_FALSE(sluice::policy::keeps_built_route(false, true, false));
  CHECK_FALSE(sluice::policy::keeps_built_route(true, false, false));
  CHECK_FALSE(sluice::policy::keeps_built_route(true, true, true));
}
