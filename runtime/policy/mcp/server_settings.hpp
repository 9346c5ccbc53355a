#pragma once

// The settings of one upstream MCP server (`[mcp.servers.NAME]`), apart
// from the machinery they configure: the config reader and the server's
// source actor both look down at this header. Data only.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/source/http_settings.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// How the node reaches an MCP server.
enum class mcp_transport : uint8_t {
  /// A child process the node starts, JSON-RPC on its stdin and stdout.
  stdio,
  /// Streamable HTTP (or HTTPS) at `url`.
  http,
};

struct mcp_server_settings {
  /// Its name in the config, logs, /status and JSON-RPC errors.
  std::string name;
  /// Its tools are listed to clients as `prefix` + the server's name.
  std::string prefix;
  mcp_transport transport = mcp_transport::stdio;
  /// http: the server's MCP endpoint, `http[s]://HOST[:PORT]/PATH`; the
  /// TLS settings of an https:// one (unset: the defaults, which verify);
  /// headers sent with every request (values already read from
  /// `env:`/`file:`: credentials); the longest wait for a connection (and
  /// its TLS handshake).
  std::string url;
  std::optional<http_tls_config> tls;
  std::vector<std::pair<std::string, std::string>> headers;
  duration connect_timeout = std::chrono::seconds{5};
  /// stdio: the command the node starts (a path, or a name on PATH), its
  /// arguments, variables added to its environment (values already read
  /// from `env:`/`file:`), and its working directory (empty: the node's).
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  /// Longest wait for a started server to answer `initialize` (and, over
  /// HTTP, for any exchange of the gateway's own: tools/list, a
  /// notification).
  duration init_timeout = std::chrono::seconds{10};
  /// Longest silence of a tool call: neither its answer nor a progress
  /// notification for it this long (SPEC §13: progress is productive time;
  /// the rule is `policy::read_deadline`'s, as for a stream's pieces).
  duration idle_timeout = std::chrono::seconds{60};
  /// Longest tool call, progress or not (the kind's attempt timeout bounds
  /// it too).
  duration call_timeout = std::chrono::seconds{600};
  /// A server that exited is started again after `restart_backoff`,
  /// doubled at each exit in a row that came before it was ready, up to
  /// `restart_backoff_max`.
  duration restart_backoff = std::chrono::seconds{1};
  duration restart_backoff_max = std::chrono::seconds{60};
  /// Longest line (one JSON-RPC message) read from the server; a longer one
  /// is dropped whole (and a call waiting for it times out).
  size_t max_message_bytes = 4u << 20;
  /// Longest wait, at a stop, between SIGTERM and SIGKILL (HTTP: for the
  /// DELETE that ends the session).
  duration stop_grace = std::chrono::seconds{2};
};

} // namespace sluice
