// Model names against a route's table and a key's allowed models.

#include "sluice/runtime/policy/model_match.hpp"

#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

using namespace sluice::policy;

TEST_CASE("model match: globs with '*' and '?'") {
  CHECK(glob_match("gpt-4o*", "gpt-4o"));
  CHECK(glob_match("gpt-4o*", "gpt-4o-mini"));
  CHECK_FALSE(glob_match("gpt-4o*", "gpt-4"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("*", "anything"));
  CHECK(glob_match("claude-*-sonnet", "claude-3-5-sonnet"));
  CHECK_FALSE(glob_match("claude-*-sonnet", "claude-3-5-haiku"));
  CHECK(glob_match("gpt-?", "gpt-4"));
  CHECK_FALSE(glob_match("gpt-?", "gpt-40"));
  CHECK(glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(glob_match("a*b*c", "aXXbYY"));
  // A hostile pattern stays cheap (no exponential backtracking).
  std::string many(200, '*');
  many += "b";
  CHECK_FALSE(glob_match(many, std::string(256, 'a')));
}

TEST_CASE("model match: an exact name beats globs, the most specific glob "
          "beats the rest") {
  model_rules r;
  r.add("*", 0);
  r.add("gpt-*", 1);
  r.add("gpt-4o*", 2);
  r.add("gpt-4o", 3);
  CHECK(r.match("gpt-4o") == 3u);
  CHECK(r.match("gpt-4o-mini") == 2u);
  CHECK(r.match("gpt-3.5-turbo") == 1u);
  CHECK(r.match("llama") == 0u);
  CHECK(r.exact_names() == std::vector<std::string>{"gpt-4o"});
  model_rules none;
  none.add("text-embedding-3-small", 0);
  CHECK_FALSE(none.match("text-embedding-3-large"));
  CHECK_FALSE(none.match(std::string(300, 'x')));
  CHECK_FALSE(none.match(""));
}

TEST_CASE("model match: malformed and duplicate names are refused") {
  model_rules r;
  CHECK_THROWS_AS(r.add("", 0), std::invalid_argument);
  CHECK_THROWS_AS(r.add(std::string(257, 'm'), 0), std::invalid_argument);
  CHECK_THROWS_AS(r.add("gpt\n4", 0), std::invalid_argument);
  r.add("gpt-4o", 0);
  CHECK_THROWS_AS(r.add("gpt-4o", 1), std::invalid_argument);
  r.add("gpt-*", 1);
  CHECK_THROWS_AS(r.add("gpt-*", 2), std::invalid_argument);
}
