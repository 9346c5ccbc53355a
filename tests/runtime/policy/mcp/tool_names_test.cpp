// Several MCP servers' tools under one gateway: prefixes, collisions,
// malformed names, the per-server bound and a key's allowed tools.

#include "sluice/runtime/policy/mcp/tool_names.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

using namespace sluice::policy::mcp;
using reason = left_out_tool::reason;

namespace {

std::vector<tool_entry> tools(std::vector<std::string> names) {
  std::vector<tool_entry> out;
  for (auto& n : names)
    out.push_back({std::move(n), tool_hints{}});
  return out;
}

std::vector<std::string> gateway_names(const tool_directory& d) {
  std::vector<std::string> out;
  for (auto& t : d.list())
    out.push_back(t.gateway_name);
  return out;
}

using pairs = std::vector<std::pair<std::string, std::string>>;

} // namespace

TEST_CASE("mcp tool_names: tool names and prefixes") {
  CHECK(valid_tool_name("echo"));
  CHECK(valid_tool_name("get_weather.v2-beta"));
  CHECK(valid_tool_name("A"));
  CHECK(valid_tool_name(std::string(128, 'a')));
  CHECK_FALSE(valid_tool_name(std::string(129, 'a')));
  CHECK_FALSE(valid_tool_name(""));
  for (auto bad :
       {"get weather", "a/b", "a:b", "caf\xc3\xa9", "a\nb", "a@b", "a,b", "*"})
    CHECK_FALSE(valid_tool_name(bad));
  CHECK_FALSE(valid_tool_name(std::string("a\0b", 3)));
  CHECK(valid_prefix(""));
  CHECK(valid_prefix("everything_"));
  CHECK(valid_prefix(std::string(64, 'p')));
  CHECK_FALSE(valid_prefix(std::string(65, 'p')));
  CHECK_FALSE(valid_prefix("a b"));
  CHECK_FALSE(valid_prefix("a/"));
}

TEST_CASE("mcp tool_names: add_server refuses malformed prefixes and "
          "duplicate or empty server names") {
  tool_directory d;
  CHECK_THROWS_WITH(d.add_server("fs", std::string(65, 'p')),
                    Catch::Contains("tool prefix of MCP server 'fs' must be "
                                    "at most 64 bytes"));
  CHECK_THROWS_AS(d.add_server("fs", "fs/"), std::invalid_argument);
  CHECK_THROWS_AS(d.add_server("fs", "f s_"), std::invalid_argument);
  CHECK_THROWS_AS(d.add_server("fs", "caf\xc3\xa9_"), std::invalid_argument);
  CHECK_THROWS_WITH(d.add_server("", "x_"), Catch::Contains("needs a name"));
  d.add_server("fs", std::string(64, 'p'));
  d.add_server("web", "");
  CHECK_THROWS_WITH(d.add_server("fs", "other_"),
                    Catch::Contains("'fs' is added twice"));
  CHECK_THROWS_AS(d.set_tools("nope", tools({"x"})), std::invalid_argument);
}

TEST_CASE("mcp tool_names: a gateway name is prefix and name, and resolves "
          "to the server's own name and hints") {
  tool_directory d;
  d.add_server("everything", "everything_");
  d.add_server("plain", "");
  auto r = d.set_tools(
      "everything", {{"echo", hints_of(true, {}, {})}, {"add", tool_hints{}}});
  CHECK(r.clean());
  CHECK(d.set_tools("plain", tools({"search"})).clean());
  auto echo = d.resolve("everything_echo");
  REQUIRE(echo);
  CHECK(echo->gateway_name == "everything_echo");
  CHECK(echo->server == "everything");
  CHECK(echo->name == "echo");
  CHECK(echo->hints == tool_hints{true, false, true});
  auto search = d.resolve("search");
  REQUIRE(search);
  CHECK(search->server == "plain");
  CHECK(search->name == "search");
  CHECK_FALSE(d.resolve("echo"));
  CHECK_FALSE(d.resolve("everything_"));
  CHECK_FALSE(d.resolve(""));
  CHECK_FALSE(d.resolve(std::string(100000, 'e')));
  CHECK(d.size() == 3);
}

TEST_CASE("mcp tool_names: list is in the order servers were added, then "
          "each server's own order") {
  tool_directory d;
  d.add_server("b", "b_");
  d.add_server("a", "a_");
  // The listings arrive in the other order.
  d.set_tools("a", tools({"zeta", "alpha"}));
  d.set_tools("b", tools({"mid", "first", "last"}));
  CHECK(gateway_names(d) == std::vector<std::string>{"b_mid", "b_first",
                                                     "b_last", "a_zeta",
                                                     "a_alpha"});
  // Listed again, the same.
  CHECK(gateway_names(d) == std::vector<std::string>{"b_mid", "b_first",
                                                     "b_last", "a_zeta",
                                                     "a_alpha"});
  auto all = d.list();
  REQUIRE(all.size() == 5);
  CHECK(all[3].server == "a");
  CHECK(all[3].name == "zeta");
}

TEST_CASE("mcp tool_names: on a collision the server added first keeps the "
          "name, whichever listing came first") {
  tool_directory d;
  d.add_server("first", "");
  d.add_server("second", "");
  SECTION("the first server's listing first") {
    CHECK(d.set_tools("first", tools({"search", "fetch"})).clean());
    auto r = d.set_tools("second", tools({"search", "other"}));
    REQUIRE(r.left_out.size() == 1);
    CHECK(r.left_out[0].why == reason::collision);
    CHECK(r.left_out[0].server == "second");
    CHECK(r.left_out[0].name == "search");
    CHECK(r.left_out[0].gateway_name == "search");
    CHECK(r.left_out[0].holder == "first");
  }
  SECTION("the second server's listing first") {
    CHECK(d.set_tools("second", tools({"search", "other"})).clean());
    CHECK(d.resolve("search")->server == "second");
    // The first server's listing takes the name back, and says so.
    auto r = d.set_tools("first", tools({"search", "fetch"}));
    REQUIRE(r.left_out.size() == 1);
    CHECK(r.left_out[0].why == reason::collision);
    CHECK(r.left_out[0].server == "second");
    CHECK(r.left_out[0].holder == "first");
  }
  CHECK(d.resolve("search")->server == "first");
  CHECK(d.resolve("other")->server == "second");
  CHECK(gateway_names(d) ==
        std::vector<std::string>{"search", "fetch", "other"});
  REQUIRE(d.collisions().size() == 1);
  CHECK(d.collisions()[0].server == "second");
  CHECK(d.size() == 3);
  // The holder drops the tool: the other server's one is offered.
  auto r = d.set_tools("first", tools({"fetch"}));
  CHECK(r.clean());
  CHECK(d.resolve("search")->server == "second");
  CHECK(d.collisions().empty());
}

TEST_CASE("mcp tool_names: a prefix that begins another collides on some "
          "names only") {
  tool_directory d;
  d.add_server("a", "a_");
  d.add_server("ab", "a_b_");
  d.set_tools("a", tools({"b_x", "y"}));
  auto r = d.set_tools("ab", tools({"x", "y"}));
  REQUIRE(r.left_out.size() == 1);
  CHECK(r.left_out[0].gateway_name == "a_b_x");
  CHECK(r.left_out[0].server == "ab");
  CHECK(r.left_out[0].holder == "a");
  CHECK(d.resolve("a_b_x")->name == "b_x");
  CHECK(d.resolve("a_b_y")->server == "ab");
  CHECK(d.resolve("a_y")->server == "a");
  // A report names only collisions its server takes part in.
  d.add_server("c", "c_");
  CHECK(d.set_tools("c", tools({"x"})).clean());
}

TEST_CASE("mcp tool_names: malformed, overlong and duplicate names are left "
          "out and reported, never offered") {
  tool_directory d;
  std::string prefix(60, 'p');
  d.add_server("s", prefix);
  std::string huge(1 << 20, 'n');
  huge[5] = ' ';
  auto r = d.set_tools(
      "s", tools({"ok", "", "bad name", "caf\xc3\xa9", "a\nb", huge,
                  std::string(68, 'm'), std::string(69, 'm'), "ok", "ok2"}));
  CHECK(r.over_limit == 0);
  REQUIRE(r.left_out.size() == 7);
  CHECK(r.left_out[0].why == reason::bad_name);
  CHECK(r.left_out[0].name.empty());
  CHECK(r.left_out[0].gateway_name.empty());
  CHECK(r.left_out[1].why == reason::bad_name);
  CHECK(r.left_out[1].name == "bad name");
  CHECK(r.left_out[2].why == reason::bad_name);
  CHECK(r.left_out[3].why == reason::bad_name);
  CHECK(r.left_out[4].why == reason::bad_name);
  CHECK(r.left_out[4].name.size() == max_reported_name_bytes);
  CHECK(r.left_out[5].why == reason::too_long);
  CHECK(r.left_out[5].name == std::string(69, 'm'));
  CHECK(r.left_out[5].gateway_name == prefix + std::string(69, 'm'));
  CHECK(r.left_out[6].why == reason::duplicate);
  CHECK(r.left_out[6].name == "ok");
  for (auto& x : r.left_out)
    CHECK(x.server == "s");
  // 60 + 68 = 128 bytes: the longest gateway name.
  CHECK(d.resolve(prefix + std::string(68, 'm')));
  CHECK(gateway_names(d) ==
        std::vector<std::string>{prefix + "ok", prefix + std::string(68, 'm'),
                                 prefix + "ok2"});
  for (auto& t : d.list())
    CHECK(valid_tool_name(t.gateway_name));
}

TEST_CASE("mcp tool_names: at most 4096 tools per server") {
  tool_directory d;
  d.add_server("big", "big_");
  std::vector<std::string> names;
  for (size_t i = 0; i < max_tools_per_server + 904; ++i)
    names.push_back("t" + std::to_string(i));
  auto r = d.set_tools("big", tools(names));
  CHECK(r.over_limit == 904);
  CHECK(r.left_out.empty());
  CHECK_FALSE(r.clean());
  CHECK(d.size() == max_tools_per_server);
  CHECK(d.resolve("big_t4095"));
  CHECK_FALSE(d.resolve("big_t4096"));
  // Exactly at the bound: nothing over.
  names.resize(max_tools_per_server);
  CHECK(d.set_tools("big", tools(names)).clean());
  // Replaced by a shorter listing: the old names are gone.
  CHECK(d.set_tools("big", tools({"only"})).clean());
  CHECK(d.size() == 1);
  CHECK_FALSE(d.resolve("big_t0"));
}

TEST_CASE("mcp tool_names: check_prefixes refuses equal prefixes naming "
          "both servers") {
  CHECK_NOTHROW(tool_directory::check_prefixes({}));
  CHECK_NOTHROW(tool_directory::check_prefixes(
      pairs{{"everything", "everything_"}, {"fs", "fs_"}, {"web", ""}}));
  // One prefix beginning another is accepted (set_tools reports those).
  CHECK_NOTHROW(
      tool_directory::check_prefixes(pairs{{"a", "a_"}, {"ab", "a_b_"}}));
  CHECK_THROWS_WITH(
      tool_directory::check_prefixes(
          pairs{{"fs", "x_"}, {"web", "w_"}, {"git", "x_"}}),
      Catch::Contains("MCP servers 'fs' and 'git' have the same tool prefix "
                      "'x_'"));
  CHECK_THROWS_WITH(
      tool_directory::check_prefixes(pairs{{"fs", ""}, {"web", ""}}),
      Catch::Contains("'fs' and 'web' have the same tool prefix (none)"));
  CHECK_THROWS_WITH(
      tool_directory::check_prefixes(pairs{{"fs", "a_"}, {"fs", "b_"}}),
      Catch::Contains("'fs' is listed twice"));
  CHECK_THROWS_WITH(
      tool_directory::check_prefixes(pairs{{"fs", "a_"}, {"web", "w w"}}),
      Catch::Contains("MCP server 'web'"));
  CHECK_THROWS_AS(tool_directory::check_prefixes(pairs{{"", "a_"}}),
                  std::invalid_argument);
}

TEST_CASE("mcp tool_names: a key's allowed tools") {
  CHECK(tool_allowed({}, "anything"));
  CHECK(tool_allowed({}, ""));
  std::vector<std::string> some{"fs_read*", "web_search", "git_?"};
  CHECK(tool_allowed(some, "fs_read"));
  CHECK(tool_allowed(some, "fs_read_file"));
  CHECK(tool_allowed(some, "web_search"));
  CHECK(tool_allowed(some, "git_x"));
  CHECK_FALSE(tool_allowed(some, "git_xy"));
  CHECK_FALSE(tool_allowed(some, "fs_write"));
  CHECK_FALSE(tool_allowed(some, "web_search2"));
  CHECK_FALSE(tool_allowed(some, ""));
  CHECK(tool_allowed({"*"}, "fs_write"));
}
