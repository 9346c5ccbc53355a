// `[mcp]` and `[mcp.servers.NAME]` as read from a file (SPEC §13): each
// transport's keys, secrets by reference, and every refusal naming its key
// and line.

#include "config_file_shared.hpp"

#include <cstdlib>

using namespace config_file_test_support;

namespace {

// A refusal's key, checked with its line.
void refused(const std::string& text, const std::string& key, int line,
             const std::string& words) {
  auto e = refusal(text);
  REQUIRE(e);
  CAPTURE(e->what());
  CHECK(e->key() == key);
  CHECK(e->line() == line);
  CHECK(std::string{e->what()}.find(words) != std::string::npos);
}

} // namespace

TEST_CASE("config mcp: a stdio server and an http one, as written") {
  ::setenv("SLUICE_TEST_MCP_TOKEN", "Bearer t0ken-0123456789abcdef", 1);
  auto cfg = parse_config(R"toml(
[mcp]
max_sessions = 5
session_idle_s = 30

[mcp.servers.local]
command = "/usr/bin/true"
args = ["--x"]
env = { A = "1" }
stop_grace_s = 3

[mcp.servers.remote]
transport = "http"
url = "https://127.0.0.1:3001/mcp"
prefix = "r_"
connect_timeout_s = 2
headers = { Authorization = "env:SLUICE_TEST_MCP_TOKEN", X-API-Key = "k" }
)toml");
  REQUIRE(cfg.mcp.servers.size() == 2);
  auto& local = cfg.mcp.servers[0];
  CHECK(local.transport == mcp_transport::stdio);
  CHECK(local.command == "/usr/bin/true");
  CHECK(local.prefix == "local_");
  CHECK(local.stop_grace == 3s);
  auto& remote = cfg.mcp.servers[1];
  CHECK(remote.transport == mcp_transport::http);
  CHECK(remote.url == "https://127.0.0.1:3001/mcp");
  CHECK(remote.prefix == "r_");
  CHECK(remote.connect_timeout == 2s);
  REQUIRE(remote.headers.size() == 2);
  CHECK(remote.headers[0].second ==
        "Bearer t0ken-0123456789abcdef"); // read at parse
  CHECK(cfg.mcp.max_sessions == 5);
  CHECK(cfg.mcp.prints.size() == 2);
  // A reload compares each server's table: its text, never a secret's
  // value.
  CHECK(cfg.mcp.prints[1].find("t0ken") == std::string::npos);
  ::unsetenv("SLUICE_TEST_MCP_TOKEN");
}

TEST_CASE("config mcp: every refusal names its key and line") {
  refused("[mcp.servers.a]\ntransport = \"ftp\"\n", "mcp.servers.a.transport",
          2, "\"stdio\"");
  refused("[mcp.servers.a]\ntransport = \"http\"\n", "mcp.servers.a.url", 1,
          "missing");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = \"ftp://x/mcp\"\n",
          "mcp.servers.a.url", 3, "must be http://");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\ncommand = \"x\"\n",
          "mcp.servers.a.command", 4, "only for transport = \"stdio\"");
  refused("[mcp.servers.a]\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
          "mcp.servers.a.url", 3, "only for transport = \"http\"");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\n[mcp.servers.a.tls]\nverify = false\n",
          "mcp.servers.a.tls", 4, "use https://");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\nheaders = { Host = \"evil\" }\n",
          "mcp.servers.a.headers", 4, "'Host' is no header");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\nheaders = { X = "
          "\"env:SLUICE_TEST_NO_SUCH_VARIABLE\" }\n",
          "mcp.servers.a.headers.X", 4, "SLUICE_TEST_NO_SUCH_VARIABLE");
  // A credential may be set, but never split the request.
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = "
          "\"Bearer x\\r\\nHost: evil\" }\n",
          "mcp.servers.a.headers", 4, "'Authorization' is no header");
  refused("[mcp.servers.a]\ntransport = \"http\"\nurl = "
          "\"http://127.0.0.1:1/mcp\"\nheaders = { mcp-session-id = "
          "\"s\" }\n",
          "mcp.servers.a.headers", 4, "'mcp-session-id' is no header");
  refused("[mcp.servers.a]\ncommand = \"x\"\nstop_grace_s = 0\n",
          "mcp.servers.a.stop_grace_s", 3, "must be positive");
  refused("[mcp.servers.a]\ncommand = \"x\"\nprefix = \"p_\"\n"
          "[mcp.servers.b]\ncommand = \"y\"\nprefix = \"p_\"\n",
          "mcp.servers", 1, "same tool prefix 'p_'");
}
