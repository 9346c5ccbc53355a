// Tokens and spend at the node (SPEC §12): a key's and a route's tokens per
// minute and budgets, reserved before a call and settled with its usage;
// 429s with OpenAI's codes and x-ratelimit-* headers; a stream's usage
// asked for by the gateway and taken out again. Over real sockets on
// loopback, against simulated sources whose usage is known: a chat call
// with the message "hi" uses 1 prompt and 10 completion tokens, and the
// node reserves 1 + 4 + 3 prompt tokens and default_max_tokens = 10.

#include <fstream>
#include <string>

#include <unistd.h>

#include "node_auth_shared.hpp"

using namespace node_auth_test_support;

namespace {

std::string spend_config(const std::string& extra = "") {
  set_keys();
  return R"toml(
[node]
access_log = "off"
default_max_tokens = 10

[auth]
admin_key = "env:SLUICE_TEST_ADMIN"
  [auth.keys.team-t]
  key = "env:SLUICE_TEST_KEY_A"
  tokens_per_minute = 100
  [auth.keys.team-q]
  key = "env:SLUICE_TEST_KEY_B"
  budget_usd_per_day = 50

[sources.fast]
type = "simulated"
  [[sources.fast.phases]]
  latency_min_ms = 0
  latency_max_ms = 0

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fast"]

[routes."/v2/chat/completions"]
kind = "chat"
sources = ["fast"]
tokens_per_minute = 40

[prices."sim-chat"]
input = 1000000    # a dollar a token: the sums below are whole dollars
output = 1000000
)toml" + extra;
}

const std::string hi =
    R"({"model":"sim-chat","messages":[{"role":"user","content":"hi"}]})";

reply call(uint16_t port, const char* key, const std::string& body = hi,
           const std::string& path = "/v1/chat/completions") {
  return exchange_with(port, http::verb::post, path, body, bearer(key));
}

nlohmann::json spend_of(uint16_t port) {
  return exchange_with(port, http::verb::get, "/status", "", bearer(admin))
      .doc()["spend"];
}

} // namespace

TEST_CASE("spend: a key's tokens per minute - reserved before, settled with "
          "the usage after, 429 tokens with x-ratelimit headers beyond",
          "[node][spend]") {
  node_under_test node{spend_config()};
  auto p = node.port();
  // 18 reserved each, 11 used: 8 calls fit (7 x 11 + 18 = 95), not a 9th.
  auto first = call(p, key_a);
  REQUIRE(first.status == 200);
  CHECK(first.doc()["usage"]["total_tokens"] == 11);
  CHECK(first.header("x-ratelimit-limit-tokens") == "100");
  CHECK(first.header("x-ratelimit-remaining-tokens") == "82"); // 100 - 18
  CHECK_FALSE(first.header("x-ratelimit-reset-tokens").empty());
  for (int i = 1; i < 8; ++i)
    REQUIRE(call(p, key_a).status == 200);
  auto spend = spend_of(p)["keys"]["team-t"];
  CHECK(spend["tokens_per_minute"]["used"] == 88);
  CHECK(spend["tokens_per_minute"]["limit"] == 100);
  CHECK(spend["tokens_in_flight"] == 0);
  auto over = call(p, key_a);
  CHECK(over.status == 429);
  CHECK(code_of(over) == "rate_limit_exceeded");
  CHECK(over.doc()["error"]["type"] == "tokens");
  CHECK_THAT(over.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("key team-t on tokens per min (TPM): Limit 100, "
                             "Requested 18"));
  // The first call's tokens leave the window 61 s after it.
  REQUIRE_FALSE(over.retry_after.empty());
  CHECK(std::stoi(over.retry_after) >= 59);
  CHECK(std::stoi(over.retry_after) <= 61);
  CHECK(over.header("x-ratelimit-remaining-tokens") == "12");
  // Nothing was reserved for the refused call.
  CHECK(spend_of(p)["keys"]["team-t"]["tokens_in_flight"] == 0);
  // A request larger than the whole limit: never retried into a fit.
  auto large =
      call(p, key_a, R"({"model":"sim-chat","max_tokens":500,"messages":[]})");
  CHECK(large.status == 429);
  CHECK(large.doc()["error"]["type"] == "tokens");
  CHECK_THAT(large.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("Request too large"));
  CHECK(large.retry_after.empty());
  // A max_tokens of 2^64 - 1 does not wrap the reservation to a few tokens.
  auto huge = call(
      p, key_a,
      R"({"model":"sim-chat","max_tokens":18446744073709551615,"messages":[]})");
  CHECK(huge.status == 429);
  CHECK_THAT(huge.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("Request too large"));
}

TEST_CASE("spend: a key's budget - passed only by what calls cost beyond "
          "their estimates, then 429 insufficient_quota until midnight UTC",
          "[node][spend]") {
  node_under_test node{spend_config()};
  auto p = node.port();
  // $18 reserved each, $11 spent: three fit (33 + 18 = 51 > 50).
  for (int i = 0; i < 3; ++i)
    REQUIRE(call(p, key_b).status == 200);
  auto over = call(p, key_b);
  CHECK(over.status == 429);
  CHECK(code_of(over) == "insufficient_quota");
  CHECK(over.doc()["error"]["type"] == "insufficient_quota");
  CHECK_THAT(over.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("budget per day of key team-q ($50.00)"));
  REQUIRE_FALSE(over.retry_after.empty());
  CHECK(std::stoi(over.retry_after) >= 1);
  CHECK(std::stoi(over.retry_after) <= 86400);
  auto b = spend_of(p)["keys"]["team-q"]["budget_usd_per_day"];
  CHECK(b["spent"] == 33.0);
  CHECK(b["left"] == 17.0);
  CHECK(b["limit"] == 50.0);
  // /metrics says the same, as gauges.
  auto m = exchange_with(p, http::verb::get, "/metrics", "", bearer(admin));
  REQUIRE(m.status == 200);
  for (auto line :
       {R"(sluice_spend_limit{scope="key team-q",limit="budget_usd_per_day"} 50)",
        R"(sluice_spend_used{scope="key team-q",limit="budget_usd_per_day"} 33)",
        R"(sluice_spend_left{scope="key team-q",limit="budget_usd_per_day"} 17)",
        R"(sluice_spend_limit{scope="key team-t",limit="tokens_per_minute"} 100)",
        R"(sluice_spend_limit{scope="/v2/chat/completions",limit="tokens_per_minute"} 40)"})
    CHECK(m.body.find(std::string{"\n"} + line + "\n") != std::string::npos);
  // A model with no price under a budget: refused, not counted as free.
  auto unpriced =
      call(p, key_b,
           R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})");
  CHECK(unpriced.status == 403);
  CHECK(unpriced.doc()["error"]["param"] == "model");
  CHECK_THAT(unpriced.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("has no price"));
}

TEST_CASE("spend: a route's tokens per minute hold for all keys together",
          "[node][spend]") {
  node_under_test node{spend_config()};
  auto p = node.port();
  const std::string v2 = "/v2/chat/completions";
  // 18 reserved, 11 used: 11 + 18 = 29, 22 + 18 = 40 fit; 33 + 18 not.
  CHECK(call(p, key_a, hi, v2).status == 200);
  CHECK(call(p, key_b, hi, v2).status == 200);
  CHECK(call(p, key_a, hi, v2).status == 200);
  auto over = call(p, key_b, hi, v2);
  CHECK(over.status == 429);
  CHECK_THAT(over.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("/v2/chat/completions on tokens per min"));
  CHECK(spend_of(p)["routes"][v2]["tokens_per_minute"]["used"] == 33);
}

TEST_CASE("spend: a stream's usage is read - asked for by the gateway and "
          "taken out when the client did not ask, passed on when it did",
          "[node][spend][stream]") {
  node_under_test node{spend_config()};
  auto p = node.port();
  auto plain = call(
      p, key_a,
      R"({"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]})");
  REQUIRE(plain.status == 200);
  CHECK(plain.body.find("usage") == std::string::npos);
  // Every piece of the answer came (a zero-latency simulated stream was
  // once only `[DONE]`).
  CHECK(plain.body.find("\"content\":\"This is a sim") != std::string::npos);
  CHECK(plain.body.find("data: [DONE]") != std::string::npos);
  CHECK(plain.header("x-ratelimit-limit-tokens") == "100");
  CHECK(spend_of(p)["keys"]["team-t"]["tokens_per_minute"]["used"] == 11);
  auto asked = call(
      p, key_a,
      R"({"model":"sim-chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]})");
  REQUIRE(asked.status == 200);
  CHECK(asked.body.find("\"usage\":{") != std::string::npos);
  CHECK(asked.body.find("\"usage\":null") != std::string::npos);
  CHECK(spend_of(p)["keys"]["team-t"]["tokens_per_minute"]["used"] == 22);
}

TEST_CASE("spend: a reload changes the limits and keeps what was counted",
          "[node][spend]") {
  std::string path =
      "/tmp/sluice-spend-reload-" + std::to_string(::getpid()) + ".toml";
  auto write = [&](const std::string& text) {
    std::ofstream out{path, std::ios::trunc};
    out << text;
  };
  auto text = spend_config();
  write(text);
  node_under_test node{text};
  node.serve_reloads(path);
  auto p = node.port();
  REQUIRE(call(p, key_a).status == 200);
  REQUIRE(call(p, key_b).status == 200);
  auto at = text.find("tokens_per_minute = 100");
  REQUIRE(at != std::string::npos);
  text.replace(at, 23, "tokens_per_minute = 200");
  write(text);
  auto r =
      exchange_with(p, http::verb::post, "/admin/reload", "", bearer(admin));
  REQUIRE(r.doc()["reloaded"] == true);
  auto spend = spend_of(p);
  CHECK(spend["keys"]["team-t"]["tokens_per_minute"]["limit"] == 200);
  CHECK(spend["keys"]["team-t"]["tokens_per_minute"]["used"] == 11);
  CHECK(spend["keys"]["team-q"]["budget_usd_per_day"]["spent"] == 11.0);
  ::unlink(path.c_str());
}

TEST_CASE("spend: /metrics counts tokens and cost by key, model and source, "
          "streamed or not, under a limit or only priced",
          "[node][spend]") {
  set_keys();
  // No limit at all: the price alone has the usage read.
  node_under_test node{R"toml(
[node]
access_log = "off"

[auth]
admin_key = "env:SLUICE_TEST_ADMIN"
  [auth.keys.plain]
  key = "env:SLUICE_TEST_KEY_A"

[sources.fast]
type = "simulated"
  [[sources.fast.phases]]
  latency_min_ms = 0
  latency_max_ms = 0

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fast"]

[prices."sim-chat"]
input = 1000000
output = 1000000
)toml"};
  auto p = node.port();
  REQUIRE(call(p, key_a).status == 200);
  auto streamed = call(
      p, key_a,
      R"({"model":"sim-chat","stream":true,"messages":[{"role":"user","content":"hi"}]})");
  REQUIRE(streamed.status == 200);
  CHECK(streamed.body.find("usage") == std::string::npos);
  auto m = exchange_with(p, http::verb::get, "/metrics", "", bearer(admin));
  REQUIRE(m.status == 200);
  auto has = [&](const std::string& line) {
    return m.body.find("\n" + line + "\n") != std::string::npos;
  };
  CHECK(has(R"(sluice_tokens_total{key="plain",model="sim-chat",source="fast",type="prompt"} 2)"));
  CHECK(has(R"(sluice_tokens_total{key="plain",model="sim-chat",source="fast",type="completion"} 20)"));
  CHECK(has(R"(sluice_cost_usd_total{key="plain",model="sim-chat",source="fast"} 22.00000000)"));
  CHECK(has(R"(sluice_usage_estimated_total{key="plain",model="sim-chat",source="fast"} 0)"));
}

TEST_CASE("spend: limits per model within a key - the most specific pattern "
          "counts, other models go by the key's own",
          "[node][spend]") {
  set_keys();
  node_under_test node{R"toml(
[node]
access_log = "off"
default_max_tokens = 10

[auth]
admin_key = "env:SLUICE_TEST_ADMIN"
  [auth.keys.team]
  key = "env:SLUICE_TEST_KEY_A"
  tokens_per_minute = 1000
    [auth.keys.team.model_limits."sim-*"]
    tokens_per_minute = 500
    [auth.keys.team.model_limits."sim-chat"]
    tokens_per_minute = 39

[sources.fast]
type = "simulated"
  [[sources.fast.phases]]
  latency_min_ms = 0
  latency_max_ms = 0

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fast"]
)toml"};
  auto p = node.port();
  auto with = [&](const char* model) {
    return call(p, key_a,
                std::string{R"({"model":")"} + model +
                    R"(","messages":[{"role":"user","content":"hi"}]})");
  };
  // sim-chat: its own 39 (18 reserved, 11 used: 11 + 18 fits, 22 + 18 not).
  auto first = with("sim-chat");
  REQUIRE(first.status == 200);
  CHECK(first.header("x-ratelimit-limit-tokens") == "39");
  CHECK(first.header("x-ratelimit-remaining-tokens") == "21");
  REQUIRE(with("sim-chat").status == 200);
  auto over = with("sim-chat");
  CHECK(over.status == 429);
  CHECK_THAT(over.doc()["error"]["message"].get<std::string>(),
             Catch::Contains("key team model sim-chat on tokens per min"));
  // sim-other: the glob's 500, and the key's 1000 too.
  auto other = with("sim-other");
  REQUIRE(other.status == 200);
  CHECK(other.header("x-ratelimit-limit-tokens") == "500");
  auto spend = spend_of(p)["keys"]["team"];
  CHECK(spend["tokens_per_minute"]["used"] == 33); // 11 x 3, all models
  CHECK(spend["models"]["sim-chat"]["tokens_per_minute"]["used"] == 22);
  CHECK(spend["models"]["sim-*"]["tokens_per_minute"]["used"] == 11);
}
