#pragma once

// What the node's /mcp endpoint shares between connections (SPEC §13): the
// MCP sessions, the tools of every upstream server under their gateway
// names, and the tool calls in flight (a client's `notifications/cancelled`
// comes on another request than the call it cancels). Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sluice/actors/mcp/mcp_source.hpp"
#include "sluice/runtime/policy/mcp/tool_names.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::node {

/// An MCP session (`Mcp-Session-Id`), opened by `initialize`.
struct mcp_session {
  std::string id;
  /// The client key that opened it (empty: anonymous): only it may use it.
  std::string key;
  /// The protocol revision negotiated.
  std::string version;
  time_point last_used{};
};

class mcp_gateway {
public:
  mcp_gateway(std::vector<std::shared_ptr<const mcp_server_view>> servers,
              uint32_t max_sessions, duration session_idle);

  bool enabled() const noexcept { return !servers_.empty(); }

  // -- sessions -----------------------------------------------------------

  /// Opens a session for `key` with `version`; at `max_sessions` the one
  /// unused longest is ended first. Its id: 128 random bits, hex.
  std::string open_session(const std::string& key, const std::string& version,
                           time_point now);

  /// The session `id` of `key`, marked used at `now`; none when unknown,
  /// expired, or another key's.
  std::optional<mcp_session> use_session(const std::string& id,
                                         const std::string& key,
                                         time_point now);

  /// Ends session `id` of `key`; false when there was none.
  bool close_session(const std::string& id, const std::string& key);

  size_t sessions() const;

  // -- tools ----------------------------------------------------------------

  /// The tools offered now, as `tools/list` lists them (each the server's
  /// definition under its gateway name), to a client that may call those
  /// `allowed` says yes to.
  nlohmann::json
  list_tools(const std::function<bool(const std::string&)>& allowed);

  /// Where a call to `gateway_name` goes.
  std::optional<policy::mcp::resolved_tool>
  resolve(const std::string& gateway_name);

  /// The servers, for /status.
  const std::vector<std::shared_ptr<const mcp_server_view>>&
  servers() const noexcept {
    return servers_;
  }

  // -- calls in flight ------------------------------------------------------

  /// Registers a call of scope `scope` (a session id, or a key's name for
  /// a client without one) with JSON-RPC id `request_id` (as JSON text):
  /// `cancel` ends it. Returns a number for `forget`; 0 when one with that
  /// id is already in flight (JSON-RPC ids are unique per sender).
  uint64_t track(const std::string& scope, const std::string& request_id,
                 std::function<void()> cancel);
  void forget(uint64_t ticket);

  /// Runs the `cancel` of that call; false when none is in flight.
  bool cancel(const std::string& scope, const std::string& request_id);

private:
  /// The directory, rebuilt when a server's tools changed.
  void refresh_locked();

  std::vector<std::shared_ptr<const mcp_server_view>> servers_;
  uint32_t max_sessions_;
  duration session_idle_;

  mutable std::mutex mx_;
  std::map<std::string, mcp_session> sessions_;
  policy::mcp::tool_directory dir_;
  std::vector<uint64_t> versions_;
  /// Each server's tool definitions, by its own tool name.
  std::vector<std::map<std::string, nlohmann::json>> defs_;
  struct tracked {
    std::string key;
    std::function<void()> cancel;
  };
  std::map<uint64_t, tracked> calls_;
  std::map<std::string, uint64_t> call_keys_;
  uint64_t next_ticket_ = 1;
};

} // namespace sluice::node
