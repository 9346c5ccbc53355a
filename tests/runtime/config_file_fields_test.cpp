// The config file (continued): HOST:PORT keys, listen, the call kinds'
// Retry-After and hedging settings, model tables.

#include "config_file_shared.hpp"

using namespace config_file_test_support;

TEST_CASE("parse_host_port: host names, IPv4, bracketed IPv6, strict ports") {
  auto hp = parse_host_port("localhost:8080");
  CHECK(hp.host == "localhost");
  CHECK(hp.port == 8080);
  hp = parse_host_port("[::1]:9000");
  CHECK(hp.host == "::1"); // no brackets: ready for a resolver
  CHECK(hp.port == 9000);
  hp = parse_host_port("[2001:db8::7]:0");
  CHECK(hp.host == "2001:db8::7");
  CHECK(hp.port == 0);
  hp = parse_host_port("10.0.0.7:65535");
  CHECK(hp.host == "10.0.0.7");
  CHECK(hp.port == 65535);
  hp = parse_host_port("redis-1.internal_x", {6379});
  CHECK(hp.host == "redis-1.internal_x");
  CHECK(hp.port == 6379);
  hp = parse_host_port("[::1]", {6379});
  CHECK(hp.host == "::1");
  CHECK(hp.port == 6379);
  for (auto bad : {"",        ":80",        "host:",          "host:80x",
                   "host:-1", "host:65536", "host:000080000", "host: 80",
                   "[::1",    "[::1]x",     "[]:80",          "[host]:80",
                   "::1:80",  "a..b:80",    "-a:80",          "a-:80",
                   "a b:80",  "host",       "[::1]",          "host:80:90",
                   "[::1]:"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_host_port(bad), std::invalid_argument);
  }
  CHECK_THROWS_AS(parse_host_port(std::string(300, 'a') + ":80"),
                  std::invalid_argument);
}

TEST_CASE("parse_host_port: the cases every caller shares") {
  using Catch::Contains;
  auto why = [](std::string_view text, host_port_rules rules = {}) {
    try {
      parse_host_port(text, rules);
    } catch (const std::invalid_argument& e) {
      return std::string{e.what()};
    }
    return std::string{};
  };
  // [::1]:80 is the loopback address and port 80.
  auto hp = parse_host_port("[::1]:80");
  CHECK(hp.host == "::1");
  CHECK(hp.port == 80);
  CHECK(to_string(hp) == "[::1]:80"); // read back as written
  CHECK(to_string(parse_host_port("localhost:8080")) == "localhost:8080");
  // [::1] without a port: only where the caller has a default.
  CHECK_THAT(why("[::1]"), Contains("needs a port"));
  CHECK(parse_host_port("[::1]", {443, 1}).port == 443);
  // ::1:80 is refused: host ::1 port 80, or host ::1:80 without a port?
  CHECK_THAT(why("::1:80"), Contains("brackets"));
  CHECK_THAT(why("::1:80", {80, 1}), Contains("brackets"));
  // Port 0 is "any free port" for a listener, nothing to connect to.
  CHECK(parse_host_port("127.0.0.1:0").port == 0);
  CHECK_THAT(why("127.0.0.1:0", {std::nullopt, 1}), Contains("1..65535"));
  CHECK_THAT(why("[::1]:0", {6379, 1}), Contains("1..65535"));
  CHECK_THAT(why("127.0.0.1:65536"), Contains("0..65535"));
  CHECK_THAT(why("[::1]:65536"), Contains("0..65535"));
  // An empty host, bare or bracketed, with or without a port.
  CHECK_THAT(why(":80"), Contains("host is empty"));
  CHECK_THAT(why("", {80, 1}), Contains("host is empty"));
  CHECK_THAT(why("[]:80"), Contains("empty"));
  // Brackets hold a real IPv6 address, not merely hex digits and colons.
  CHECK_THAT(why("[1:2:3]:80"), Contains("not an IPv6 address"));
  CHECK_THAT(why("[::1::]:80"), Contains("not an IPv6 address"));
  CHECK(parse_host_port("[::ffff:10.0.0.1]:80").host == "::ffff:10.0.0.1");
}

TEST_CASE("every HOST:PORT key refuses junk with a message naming the key") {
  auto refused = [](const std::string& text) -> std::string {
    try {
      parse_config(std::string{minimal} + text);
    } catch (const config_error& e) {
      return e.key() + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused("[node]\nlisten = \"::1:80\"\n"),
             StartsWith("node.listen") && Contains("brackets"));
  CHECK_THAT(refused("[node]\nadmin_listen = \"[::1]\"\n"),
             StartsWith("node.admin_listen") && Contains("needs a port"));
  CHECK_THAT(refused("[backend]\naddress = \"[::1]:0\"\n"),
             StartsWith("backend.address") && Contains("1..65535"));
  CHECK_THAT(refused("[node]\nlisten = \":8080\"\n"),
             StartsWith("node.listen") && Contains("host is empty"));
  // And the good ones pass.
  CHECK(refused("[node]\nlisten = \"[::1]:0\"\n"
                "admin_listen = \"[::1]:9090\"\n"
                "[backend]\ntype = \"redis\"\naddress = \"[::1]\"\n")
            .empty());
}

TEST_CASE("listen takes host names and bracketed IPv6, stored unbracketed") {
  auto cfg =
      parse_config(std::string{minimal} + "[node]\nlisten = \"localhost:0\"\n");
  CHECK(cfg.node.listen_host == "localhost");
  CHECK(cfg.node.listen_port == 0);
  cfg =
      parse_config(std::string{minimal} + "[node]\nlisten = \"[::1]:8081\"\n");
  CHECK(cfg.node.listen_host == "::1");
  CHECK(cfg.node.listen_port == 8081);
  cfg = parse_config(std::string{minimal} + "[backend]\ntype = \"redis\"\n"
                                            "address = \"[::1]:6380\"\n");
  CHECK(cfg.runtime.redis->host == "::1");
  CHECK(cfg.runtime.redis->port == 6380);
  cfg = parse_config(std::string{minimal} +
                     "[backend]\ntype = \"redis\"\naddress = \"redis\"\n");
  CHECK(cfg.runtime.redis->host == "redis");
  CHECK(cfg.runtime.redis->port == 6379);
}

TEST_CASE("max_retry_after_s is read per kind, 60 s by default") {
  auto cfg = parse_config(std::string{minimal} +
                          "[kinds.chat]\nmax_retry_after_s = 120\n");
  CHECK(cfg.runtime.kinds.at("chat").max_retry_after == 120s);
  CHECK(cfg.runtime.kinds.at("embeddings").max_retry_after == 60s);
  auto e = refusal(std::string{minimal} +
                   "[kinds.chat]\nmax_retry_after_s = 86401\n");
  REQUIRE(e);
  CHECK(e->line() == 8);
  CHECK(std::string{e->what()}.find("kinds.chat.max_retry_after_s") !=
        std::string::npos);
}

TEST_CASE("hedging is read per kind, off by default, and bad settings "
          "refused naming the key") {
  auto cfg =
      parse_config(std::string{minimal} +
                   "[kinds.chat]\nhedge_after_s = 1.5\nmax_hedged = 2\n");
  CHECK(cfg.runtime.kinds.at("chat").hedge_after == 1500ms);
  CHECK(cfg.runtime.kinds.at("chat").max_hedged == 2);
  CHECK_FALSE(cfg.runtime.kinds.at("embeddings").hedge_after);
  auto e = refusal(std::string{minimal} + "[kinds.chat]\nmax_hedged = 11\n");
  REQUIRE(e);
  CHECK(e->key() == "kinds.chat.max_hedged");
  CHECK(e->line() == 8);
  e = refusal(std::string{minimal} + "[kinds.chat]\nhedge_after_s = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "kinds.chat.hedge_after_s");
}

TEST_CASE("model tables are read, and bad ones refused with key and line") {
  auto cfg = parse_config(R"toml(
[sources.a]
type = "simulated"
  [sources.a.models]
  "gpt-4o" = "gpt-4o-2024-08-06"
[sources.b]
type = "simulated"
[routes."/v1/chat/completions"]
  [routes."/v1/chat/completions".models]
  "gpt-4o" = ["a"]
  "gpt-4o*" = { sources = ["a", "b"], weights = [3, 1] }
)toml");
  CHECK(cfg.sources[0].settings.model_names.at("gpt-4o") ==
        "gpt-4o-2024-08-06");
  auto& r = cfg.routes[0].route;
  CHECK(r.sources.empty()); // no default: by model only
  REQUIRE(r.models.size() == 2);
  CHECK(r.models[0].pattern == "gpt-4o");
  CHECK(r.models[1].sources == std::vector<std::string>{"a", "b"});
  CHECK(r.models[1].weights == std::vector<double>{3, 1});
  auto head = std::string{"[sources.a]\ntype = \"simulated\"\n"};
  // An unknown source in a model entry: its key and line.
  auto e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                          "  \"m\" = [\"zz\"]\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.m");
  CHECK(e->line() == 5);
  // A control character in a pattern, a bad value, weights without match.
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\\u0001\" = [\"a\"]\n");
  REQUIRE(e);
  CHECK(e->problem().find("control") != std::string::npos);
  CHECK(e->line() == 5);
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\" = 5\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.m");
  e = refusal(head + "[routes.\"/r\"]\n  [routes.\"/r\".models]\n"
                     "  \"m\" = { sources = [\"a\"], weights = [1, 2] }\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".models.\"m\".weights");
  // Neither sources nor models.
  e = refusal(head + "[routes.\"/r\"]\nkind = \"chat\"\n");
  REQUIRE(e);
  CHECK(e->key() == "routes.\"/r\".sources");
  // A source's renames: names must be 1-256 bytes, printable.
  e = refusal("[sources.a]\ntype = \"simulated\"\n  [sources.a.models]\n"
              "  \"\" = \"x\"\n[routes.\"/r\"]\nsources = [\"a\"]\n");
  REQUIRE(e);
  CHECK(e->key().rfind("sources.a.models", 0) == 0);
  CHECK(e->line() == 4);
  // The node's own endpoints are no routes.
  for (auto own : {"/v1/models", "/v1/models/x", "/status", "/healthz"}) {
    INFO(own);
    e = refusal(head + "[routes.\"" + own + "\"]\nsources = [\"a\"]\n");
    REQUIRE(e);
    CHECK(e->problem().find("own endpoint") != std::string::npos);
  }
}
