// The config file (continued): TLS tables and files, the default config's
// file, backend settings, status rules, retry budgets, remote sources.

#include "config_file_shared.hpp"

using namespace config_file_test_support;

namespace {

// An https:// source `openai` with `tls_lines` in its [tls] table (line 5
// on), behind the chat route.
std::string https_source(const std::string& tls_lines,
                         const std::string& url = "https://127.0.0.1:8443") {
  return "\n[sources.openai]\ntype = \"http\"\nbase_url = \"" + url +
         "\"\n  [sources.openai.tls]\n" + tls_lines +
         "[routes.\"/v1/chat/completions\"]\nsources = [\"openai\"]\n";
}

std::string quoted(const std::string& path) {
  return "\"" + path + "\"";
}

} // namespace

TEST_CASE("the tls table of an https source is read and its files checked",
          "[tls]") {
  auto& pki = sluice::testing::test_pki::get();
  auto cfg = parse_config(
      https_source("  ca_file = " + quoted(pki.file("ca.pem")) + "\n" +
                   "  client_cert = " + quoted(pki.file("client.pem")) + "\n" +
                   "  client_key = " + quoted(pki.file("client.key")) + "\n" +
                   "  server_name = \"api.internal\"\n"));
  auto& s = cfg.sources.at(0);
  REQUIRE(s.http.tls);
  CHECK(s.http.tls->ca_file == pki.file("ca.pem"));
  CHECK(s.http.tls->client_cert == pki.file("client.pem"));
  CHECK(s.http.tls->client_key == pki.file("client.key"));
  CHECK(s.http.tls->server_name == "api.internal");
  CHECK(s.http.tls->verify);
  // No table: the defaults (verified against the system store).
  auto plain = parse_config(R"toml(
[sources.openai]
type = "http"
base_url = "https://api.openai.com/v1"
[routes."/v1/chat/completions"]
sources = ["openai"]
)toml");
  CHECK_FALSE(plain.sources.at(0).http.tls);
}

TEST_CASE("bad tls settings are refused with their key and line", "[tls]") {
  auto& pki = sluice::testing::test_pki::get();
  auto refused = [](const std::string& text) {
    auto e = refusal(text);
    REQUIRE(e);
    return std::make_pair(e->key(), e->line());
  };
  CHECK(refused(https_source("  ca_file = " + quoted(pki.file("missing.pem")) +
                             "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.ca_file"}, 6));
  CHECK(refused(https_source(
            "  ca_file = " + quoted(pki.file("not_a_cert.pem")) + "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.ca_file"}, 6));
  // A key that is not the certificate's.
  auto mismatch = refusal(
      https_source("  client_cert = " + quoted(pki.file("client.pem")) + "\n" +
                   "  client_key = " + quoted(pki.file("server.key")) + "\n"));
  REQUIRE(mismatch);
  CHECK(mismatch->key() == "sources.openai.tls.client_key");
  CHECK(mismatch->line() == 7);
  CHECK_THAT(mismatch->what(), Catch::Contains("does not match"));
  CHECK(refused(https_source(
            "  client_cert = " + quoted(pki.file("client.pem")) + "\n" +
            "  client_key = " + quoted(pki.file("unreadable.key")) + "\n")) ==
        std::make_pair(std::string{"sources.openai.tls.client_key"}, 7));
  CHECK(refused(https_source("  verfy = false\n")) ==
        std::make_pair(std::string{"sources.openai.tls.verfy"}, 6));
  CHECK(refused(https_source("  verify = \"no\"\n")) ==
        std::make_pair(std::string{"sources.openai.tls.verify"}, 6));
  // TLS settings on a plain http:// source.
  CHECK(refused(https_source("  verify = false\n", "http://127.0.0.1:8080")) ==
        std::make_pair(std::string{"sources.openai.tls"}, 5));
}

TEST_CASE("a FIFO named as a TLS file is refused at once, naming the key "
          "and line",
          "[tls][files]") {
  // Issue 30, finding 6: its fingerprint and OpenSSL both opened it for a
  // blocking read; nothing writes to a FIFO, so parsing the config hung.
  auto fifo = "/tmp/sluice-tls-fifo-" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  auto e = refusal(https_source("  ca_file = " + quoted(fifo) + "\n"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds{1});
  std::remove(fifo.c_str());
  REQUIRE(e);
  CHECK(e->key() == "sources.openai.tls.ca_file");
  CHECK(e->line() == 6);
  CHECK_THAT(e->what(), Catch::Contains("is not a regular file"));
}

TEST_CASE("tls.verify = false is accepted only as written, with a warning "
          "at start naming the source",
          "[tls]") {
  auto cfg = parse_config(https_source("  verify = false\n"));
  REQUIRE(cfg.sources.at(0).http.tls);
  CHECK_FALSE(cfg.sources.at(0).http.tls->verify);
  sluice::testing::log_capture log;
  caf::actor_system_config caf_cfg;
  caf::actor_system sys{caf_cfg};
  {
    runtime rt{sys, cfg.runtime};
    install(rt, cfg);
    CHECK(log.has("warning", "openai", "tls.verify = false"));
    auto src = rt.find_http_source("openai");
    REQUIRE(src);
    CHECK(src->tls);
    CHECK_FALSE(src->tls_verify);
  }
  sys.await_actors_before_shutdown(false);
}

TEST_CASE("the default config is runtime/config/default_config.toml") {
  std::ifstream in{SLUICE_SOURCE_DIR "/runtime/config/default_config.toml"};
  REQUIRE(in);
  std::stringstream file;
  file << in.rdbuf();
  // The file parses as it is (its kinds line is a comment) ...
  CHECK_NOTHROW(parse_config(file.str()));
  // ... and the embedded text is that file with the library's kinds in place
  // of that line.
  std::string text{default_config_text()};
  CHECK(text.find("{{kinds}}") == std::string::npos);
  CHECK(file.str().find("{{kinds}}") != std::string::npos);
  CHECK(text.find("[kinds.chat]") != std::string::npos);
  auto head = file.str().substr(0, file.str().find("# {{kinds}}"));
  CHECK(text.compare(0, head.size(), head) == 0);
  auto tail = file.str().substr(file.str().find("[sources.sim-primary]"));
  CHECK(text.size() >= tail.size());
  CHECK(text.compare(text.size() - tail.size(), tail.size(), tail) == 0);
}

TEST_CASE("backend settings are checked by the library's rules") {
  // What the library refuses is named with the file's key and line.
  auto e =
      refusal(std::string{minimal} + "[backend]\nreconnect_after_ms = 0\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.reconnect_after_ms");
  CHECK(e->line() > 0);
  e = refusal(std::string{minimal} +
              "[backend]\ntype = \"redis\"\nconnect_timeout_ms = -1\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.connect_timeout_ms");
  CHECK(e->problem() == "must be positive");
  e = refusal(std::string{minimal} + "[backend]\nlease_ttl_s = 0.05\n");
  REQUIRE(e);
  CHECK(e->key() == "backend.lease_ttl_s");
  CHECK(e->problem() == "must be at least 100 ms");
}

TEST_CASE("an http source's status rules are read, and bad ones refused "
          "naming the key and line") {
  auto cfg = parse_config(R"toml(
[sources.p]
type = "http"
base_url = "http://127.0.0.1:9000"
  [sources.p.statuses]
  transient = [404, 409]
  rate_limited = [529]
  permanent = [503]
  empty_2xx_transient = true
[routes."/v1/chat/completions"]
sources = ["p"]
)toml");
  auto& rules = cfg.sources.at(0).http.statuses;
  using policy::outcome_kind;
  CHECK(rules.classify(404, 1) == outcome_kind::transient);
  CHECK(rules.classify(409, 1) == outcome_kind::transient);
  CHECK(rules.classify(529, 1) == outcome_kind::rate_limited);
  CHECK(rules.classify(503, 1) == outcome_kind::permanent);
  CHECK(rules.classify(200, 0) == outcome_kind::transient);
  auto refused = [](const std::string& table) -> std::string {
    try {
      parse_config("[sources.p]\ntype = \"http\"\n"
                   "base_url = \"http://127.0.0.1:9000\"\n"
                   "[sources.p.statuses]\n" +
                   table +
                   "[routes.\"/v1/chat/completions\"]\nsources = [\"p\"]\n");
    } catch (const config_error& e) {
      return e.key() + " line " + std::to_string(e.line()) + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused("transient = [200]\n"),
             StartsWith("sources.p.statuses.transient line 5") &&
                 Contains("not in [300, 599]"));
  CHECK_THAT(refused("transient = [500]\npermanent = [\n  500]\n"),
             StartsWith("sources.p.statuses.permanent line 7") &&
                 Contains("classed twice"));
  CHECK_THAT(refused("transient = [\"404\"]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("integers"));
  CHECK_THAT(refused("transient = [99999999999]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("not in [300"));
  // 2^32 + 300: a cast to int would make it 300.
  CHECK_THAT(refused("transient = [4294967596]\n"),
             StartsWith("sources.p.statuses.transient") &&
                 Contains("not in [300"));
  CHECK_THAT(refused("retriable = [500]\n"),
             StartsWith("sources.p.statuses.retriable") &&
                 Contains("unknown key"));
  CHECK_THAT(refused("empty_2xx_transient = 1\n"),
             StartsWith("sources.p.statuses.empty_2xx_transient"));
}

TEST_CASE("a route's retry budget is read, and bad settings refused naming "
          "the key") {
  auto cfg = parse_config(std::string{minimal} + R"toml(
[routes."/v1/budgeted"]
sources = ["a"]
  [routes."/v1/budgeted".retry_budget]
  percent = 25
  min_concurrency = 2
  when_spent = "fail"
)toml");
  const route_config* budgeted = nullptr;
  for (auto& r : cfg.routes)
    if (r.route.name == "/v1/budgeted")
      budgeted = &r.route;
  REQUIRE(budgeted);
  REQUIRE(budgeted->retry_budget);
  CHECK(budgeted->retry_budget->percent == 25);
  CHECK(budgeted->retry_budget->min_concurrency == 2);
  CHECK(budgeted->retry_budget->when_spent == policy::when_budget_spent::fail);
  for (auto& r : cfg.routes)
    if (r.route.name == "/v1/chat/completions")
      CHECK_FALSE(r.route.retry_budget); // none unless configured
  auto refused = [](const std::string& table) -> std::string {
    try {
      parse_config(std::string{minimal} +
                   "[routes.\"/v1/b\"]\nsources = [\"a\"]\n"
                   "[routes.\"/v1/b\".retry_budget]\n" +
                   table);
    } catch (const config_error& e) {
      return e.key() + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK(refused("percent = 20\n").empty());
  CHECK_THAT(refused("percent = 120\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.percent") &&
                 Contains("[0, 100]"));
  CHECK_THAT(refused("percent = nan\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.percent"));
  CHECK_THAT(refused("min_concurrency = 0\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.min_concurrency"));
  CHECK_THAT(refused("min_concurrency = -1\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.min_concurrency"));
  CHECK_THAT(refused("when_spent = \"drop\"\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.when_spent") &&
                 Contains("\"wait\" or \"fail\""));
  CHECK_THAT(refused("percent = 20\n[routes.\"/v1/c\"]\nsources = [\"a\"]\n"
                     "max_ejection_percent = 150\n"),
             StartsWith("routes.\"/v1/c\".max_ejection_percent") &&
                 Contains("[0, 100]"));
  CHECK_THAT(refused("budget_percent = 20\n"),
             StartsWith("routes.\"/v1/b\".retry_budget.budget_percent") &&
                 Contains("unknown key"));
}

TEST_CASE("remote sources are read with their address, timeouts and "
          "certificates, and bad ones refused naming the key") {
  auto& pki = sluice::testing::test_pki::get();
  auto tls = "[sources.tool.tls]\nca_file = \"" + pki.file("ca.pem") +
             "\"\ncert_file = \"" + pki.file("client.pem") +
             "\"\nkey_file = \"" + pki.file("client.key") + "\"\n";
  auto cfg = parse_config(R"toml(
[sources.tool]
type = "remote"
address = "127.0.0.1:7300"
connect_timeout_s = 0.5
reconnect_max_s = 2
[routes."/v1/chat/completions"]
sources = ["tool"]
)toml" + tls + "server_name = \"tools.internal\"\n");
  REQUIRE(cfg.sources.size() == 1);
  auto& s = cfg.sources[0];
  CHECK(s.type == "remote");
  CHECK(s.remote.host == "127.0.0.1");
  CHECK(s.remote.port == 7300);
  CHECK(s.remote.connect_timeout == 500ms);
  CHECK(s.remote.reconnect_max == 2s);
  CHECK(s.remote.tls.ca_file == pki.file("ca.pem"));
  CHECK(s.remote.tls.cert_file == pki.file("client.pem"));
  CHECK(s.remote.tls.key_file == pki.file("client.key"));
  CHECK(s.remote.tls.server_name == "tools.internal");
  auto refused = [](const std::string& body,
                    const std::string& after = "") -> std::string {
    try {
      parse_config("[sources.tool]\ntype = \"remote\"\n" + body +
                   "[routes.\"/v1/chat/completions\"]\nsources = "
                   "[\"tool\"]\n" +
                   after);
    } catch (const config_error& e) {
      return e.key() + " line " + std::to_string(e.line()) + ": " + e.problem();
    }
    return {};
  };
  using Catch::Contains;
  using Catch::StartsWith;
  CHECK_THAT(refused(""),
             StartsWith("sources.tool.address") && Contains("missing"));
  CHECK_THAT(refused("address = \"127.0.0.1\"\n"),
             StartsWith("sources.tool.address") && Contains("needs a port"));
  CHECK_THAT(refused("address = \"127.0.0.1:0\"\n"),
             StartsWith("sources.tool.address"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\nbase_url = \"x\"\n"),
             StartsWith("sources.tool.base_url"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\nconnect_timeout_s = 0\n"),
             StartsWith("sources.tool.connect_timeout"));
  // Mutual TLS only: no [tls], or a file that is missing or unusable, is
  // refused naming the key and its line.
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n"),
             StartsWith("sources.tool.tls line 1") && Contains("mutual TLS"));
  auto bad_cert = tls;
  bad_cert.replace(bad_cert.find(pki.file("client.pem")),
                   pki.file("client.pem").size(), pki.file("not_a_cert.pem"));
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n", bad_cert),
             StartsWith("sources.tool.tls.cert_file line 8") &&
                 Contains("no certificate"));
  auto no_key = tls;
  no_key.replace(no_key.find(pki.file("client.key")),
                 pki.file("client.key").size(), "/nonexistent/node.key");
  CHECK_THAT(refused("address = \"127.0.0.1:7300\"\n", no_key),
             StartsWith("sources.tool.tls.key_file") &&
                 Contains("cannot read"));
}
