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

  /// Whether any server is configured (else /mcp answers 404).
  bool enabled() const;

  /// The servers a reload left (added, started again, kept), and its
  /// session limits. The lists are rebuilt from them; sessions stay.
  void set_servers(std::vector<std::shared_ptr<const mcp_server_view>> servers,
                   uint32_t max_sessions, duration session_idle);

  // -- sessions -----------------------------------------------------------

  /// Opens a session for `key` with `version`; at `max_sessions` the one
  /// unused longest is ended first. Its id: 128 random bits, hex.
  std::string open_session(const std::string& key, const std::string& version,
                           time_point now);

  /// The session `id` of `key`, marked used at `now`; none when unknown,
  /// expired, or another key's.
  std::optional<mcp_session>
  use_session(const std::string& id, const std::string& key, time_point now);

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

  // -- prompts and resources -----------------------------------------------

  /// The prompts offered now, as `prompts/list` lists them: each server's
  /// under its gateway name (the tools' prefix), those `allowed` says yes
  /// to.
  nlohmann::json
  list_prompts(const std::function<bool(const std::string&)>& allowed);

  /// Where a `prompts/get` of `gateway_name` goes.
  std::optional<policy::mcp::resolved_tool>
  resolve_prompt(const std::string& gateway_name);

  /// The resources (`resources/list`) or resource templates
  /// (`resources/templates/list`) offered now, URIs as the servers gave
  /// them, of the servers `allowed` says yes to (given each one's tool
  /// prefix; called under the gateway's lock, so it must not call back
  /// into the gateway). A URI two servers offer is the first's.
  nlohmann::json
  list_resources(bool templates,
                 const std::function<bool(const std::string&)>& allowed);

  /// The server a `resources/read` of `uri` goes to: the one that listed
  /// it, else the one with the longest template whose fixed beginning (up
  /// to its first `{`) `uri` starts with.
  std::optional<std::string> resource_server(const std::string& uri);

  /// A server's prefix (empty if there is none of that name).
  std::string prefix_of(const std::string& server) const;

  /// The servers, for /status.
  std::vector<std::shared_ptr<const mcp_server_view>> servers() const;

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
  /// The directories, rebuilt when a server's lists changed.
  void refresh_locked();

  /// Tools or prompts: names under the servers' prefixes, and each
  /// server's definitions by its own name.
  struct named_list {
    policy::mcp::tool_directory dir;
    std::vector<std::map<std::string, nlohmann::json>> defs;
  };
  void
  set_named(named_list& l, size_t server,
            const std::shared_ptr<const std::vector<nlohmann::json>>& items);
  nlohmann::json list_named(const named_list& l, const char* field,
                            const std::function<bool(const std::string&)>& ok);

  std::vector<std::shared_ptr<const mcp_server_view>> servers_;
  uint32_t max_sessions_;
  duration session_idle_;

  mutable std::mutex mx_;
  std::map<std::string, mcp_session> sessions_;
  std::vector<uint64_t> versions_;
  named_list tools_;
  named_list prompts_;
  /// Each server's resources and templates as it listed them; which
  /// server a URI is listed by (an index in `servers_`); the templates'
  /// fixed beginnings.
  std::vector<std::shared_ptr<const std::vector<nlohmann::json>>> resources_;
  std::vector<std::shared_ptr<const std::vector<nlohmann::json>>> templates_;
  std::map<std::string, size_t> uri_server_;
  std::vector<std::pair<std::string, size_t>> template_prefixes_;
  struct tracked {
    std::string key;
    std::function<void()> cancel;
  };
  std::map<uint64_t, tracked> calls_;
  std::map<std::string, uint64_t> call_keys_;
  uint64_t next_ticket_ = 1;
};

} // namespace sluice::node
