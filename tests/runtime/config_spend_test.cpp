// The config of tokens, budgets and prices (SPEC §12): read into the
// node's spend rules, and bad settings refused with key and line.

#include <string>

#include <catch2/catch.hpp>

#include "config_file_shared.hpp"

using namespace config_file_test_support;

namespace {

const char* two_models = R"toml(
[sources.a]
type = "simulated"

[routes."/v1/chat/completions"]
  [routes."/v1/chat/completions".models]
  "sim-chat" = ["a"]
  "gpt-*" = ["a"]
)toml";

} // namespace

TEST_CASE("config: tokens, budgets and prices are read per key and route") {
  ::setenv("SLUICE_TEST_SPEND_KEY", "spend-key-0123456789abcdef", 1);
  auto cfg = parse_config(R"toml(
[sources.a]
type = "simulated"

[routes."/v1/chat/completions"]
tokens_per_day = 1000000
budget_usd_per_month = 250.5
  [routes."/v1/chat/completions".models]
  "sim-chat" = ["a"]
  "gpt-*" = ["a"]

[node]
default_max_tokens = 512

[auth.keys.team]
key = "env:SLUICE_TEST_SPEND_KEY"
tokens_per_minute = 30000
budget_usd_per_day = 5

[prices."sim-chat"]
input = 2.5
output = 10
cached_input = 1.25

[prices."gpt-4o"]
input = 2.5
output = 10
)toml");
  auto& k = cfg.node.auth.keys.at(0).spend;
  CHECK(k.tokens_per_minute == 30000);
  CHECK(k.tokens_per_day == 0);
  CHECK(k.budget_usd_per_day == 5);
  auto& r = cfg.node.spend.routes.at("/v1/chat/completions");
  CHECK(r.tokens_per_day == 1000000);
  CHECK(r.budget_usd_per_month == 250.5);
  CHECK(cfg.node.spend.default_max_tokens == 512);
  CHECK(cfg.node.spend.prices.at("sim-chat").cached_input_per_m == 1.25);
  // Cached input at the input price unless given.
  CHECK(cfg.node.spend.prices.at("gpt-4o").cached_input_per_m == 2.5);
}

TEST_CASE("config: a route's limits are not part of its runtime fingerprint") {
  auto a = parse_config(minimal);
  auto b = parse_config(std::string{minimal} + "tokens_per_minute = 100\n");
  CHECK(a.routes.at(0).fingerprint == b.routes.at(0).fingerprint);
  CHECK(b.node.spend.routes.at("/v1/chat/completions").tokens_per_minute ==
        100);
}

TEST_CASE("config: limits of 0, negative prices, unknown priced models and "
          "budgets without prices are refused with key and line") {
  ::setenv("SLUICE_TEST_SPEND_KEY", "spend-key-0123456789abcdef", 1);
  auto e = refusal(std::string{minimal} + "tokens_per_minute = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".tokens_per_minute");
  CHECK(e->line() == 7);
  e = refusal(std::string{minimal} + "budget_usd_per_day = -1\n" +
              "[prices.m]\ninput = 1\noutput = 1\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".budget_usd_per_day");
  e = refusal(std::string{minimal} +
              "[auth.keys.k]\nkey = \"env:SLUICE_TEST_SPEND_KEY\"\n"
              "tokens_per_day = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "auth.keys.k.tokens_per_day");
  CHECK(e->line() == 9);
  e = refusal(std::string{minimal} +
              "[prices.\"m\"]\ninput = -2.5\noutput = 10\n");
  REQUIRE(e);
  CHECK(e->key() == "prices.\"m\".input");
  CHECK(e->line() == 8);
  e = refusal(std::string{minimal} + "[prices.\"m\"]\ninput = 2.5\n");
  REQUIRE(e);
  CHECK(e->key() == "prices.\"m\".output");
  e = refusal(std::string{minimal} +
              "[prices.\"m\"]\ninput = 1\noutput = 1\ncolour = 2\n");
  REQUIRE(e);
  CHECK(e->key() == "prices.\"m\".colour");
  // A model no route serves (the routes route by model only).
  e = refusal(std::string{two_models} +
              "[prices.\"claude-3\"]\ninput = 3\noutput = 15\n");
  REQUIRE(e);
  CHECK(e->key() == "prices.\"claude-3\"");
  CHECK(e->line() == 9);
  CHECK_THAT(e->what(), Catch::Contains("no route serves this model"));
  // A budget with no price at all would count nothing.
  e = refusal(std::string{minimal} +
              "[auth.keys.k]\nkey = \"env:SLUICE_TEST_SPEND_KEY\"\n"
              "budget_usd_per_month = 10\n");
  REQUIRE(e);
  CHECK(e->key() == "auth.keys.k.budget_usd_per_month");
  e = refusal("[node]\ndefault_max_tokens = 0\n" + std::string{minimal});
  REQUIRE(e);
  CHECK(e->key() == "node.default_max_tokens");
  CHECK(e->line() == 2);
}

TEST_CASE("config: the Redis backend's spend settings are read, and nonsense "
          "is refused with key and line") {
  auto cfg = parse_config(std::string{minimal} +
                          "[backend]\ntype = \"redis\"\n"
                          "spend_reservation_ttl_s = 30\n"
                          "spend_when_down = \"open\"\n");
  CHECK(cfg.runtime.spend_reservation_ttl == std::chrono::seconds{30});
  CHECK(cfg.runtime.spend_open_when_down);
  auto defaults = parse_config(std::string{minimal});
  CHECK(defaults.runtime.spend_reservation_ttl == std::chrono::seconds{10});
  CHECK_FALSE(defaults.runtime.spend_open_when_down);
  auto e = refusal(std::string{minimal} +
                   "[backend]\ntype = \"redis\"\nspend_when_down = \"maybe\"\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.spend_when_down");
  CHECK(e->line() == 9);
  CHECK_THAT(e->what(), Catch::Contains("\"closed\""));
  e = refusal(std::string{minimal} +
              "[backend]\ntype = \"redis\"\nspend_reservation_ttl_s = 0.5\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.spend_reservation_ttl_s");
}

TEST_CASE("config: limits per model within a key and a route, and their "
          "nonsense refused with key and line") {
  ::setenv("SLUICE_TEST_SPEND_KEY", "spend-key-0123456789abcdef", 1);
  auto cfg = parse_config(std::string{two_models} + R"toml(
[auth.keys.team]
key = "env:SLUICE_TEST_SPEND_KEY"
  [auth.keys.team.model_limits."gpt-*"]
  tokens_per_minute = 500
  [auth.keys.team.model_limits."sim-chat"]
  budget_usd_per_day = 2

[prices."sim-chat"]
input = 1
output = 1
)toml");
  auto& k = cfg.node.auth.keys.at(0).spend;
  CHECK_FALSE(k.any());
  CHECK(k.applies());
  REQUIRE(k.models.size() == 2);
  CHECK(k.models[0].pattern == "gpt-*");
  CHECK(k.models[0].spend.tokens_per_minute == 500);
  CHECK(k.models[1].pattern == "sim-chat");
  CHECK(k.models[1].spend.budget_usd_per_day == 2);
  auto route = parse_config(std::string{minimal} +
                            "tokens_per_day = 100000\n"
                            "[routes.\"/v1/chat/completions\"."
                            "model_limits.\"m-*\"]\ntokens_per_minute = 10\n");
  auto& r = route.node.spend.routes.at("/v1/chat/completions");
  CHECK(r.tokens_per_day == 100000);
  REQUIRE(r.models.size() == 1);
  CHECK(r.models[0].spend.tokens_per_minute == 10);
  // A model's table with no limit, a limit of 0, an unknown key, a budget
  // with no prices: each named with its key and line.
  auto e = refusal(std::string{minimal} +
                   "[routes.\"/v1/chat/completions\".model_limits.\"m\"]\n");
  REQUIRE(e);
  CHECK(e->key() ==
        "routes.\"/v1/chat/completions\".model_limits.\"m\".tokens_per_minute");
  CHECK_THAT(e->what(), Catch::Contains("sets no limit"));
  e = refusal(std::string{minimal} +
              "[routes.\"/v1/chat/completions\".model_limits.\"m\"]\n"
              "tokens_per_day = 0\n");
  REQUIRE(e);
  CHECK(e->key() ==
        "routes.\"/v1/chat/completions\".model_limits.\"m\".tokens_per_day");
  CHECK(e->line() == 8);
  e = refusal(std::string{minimal} +
              "[routes.\"/v1/chat/completions\".model_limits.\"m\"]\n"
              "tokens_per_day = 5\nrequests_per_minute = 3\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/v1/chat/completions\".model_limits.\"m\"."
                    "requests_per_minute");
  e = refusal(std::string{minimal} +
              "[auth.keys.k]\nkey = \"env:SLUICE_TEST_SPEND_KEY\"\n"
              "[auth.keys.k.model_limits.\"m\"]\nbudget_usd_per_month = 3\n");
  REQUIRE(e);
  CHECK(e->key() == "auth.keys.k.model_limits.\"m\".budget_usd_per_month");
  CHECK(e->line() == 9); // its table's
}
