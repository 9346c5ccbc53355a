#pragma once

// One upstream MCP server as a source (SPEC §13): the node's `tools/call`s
// for it are attempts, governed like any call. The server is a stdio child
// the source starts, restarts with backoff and ends, or a Streamable HTTP
// endpoint (actors/mcp/channel.hpp: one actor for both).

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/mcp/retry_safety.hpp"
#include "sluice/runtime/policy/mcp/server_settings.hpp"

namespace sluice {

/// What a server's source knows of it, for the node (its tools, for
/// `tools/list`) and operators (/status). Written by the source actor,
/// read from any thread.
class mcp_server_view {
public:
  enum class state_kind : uint8_t { starting, ready, down, stopped };

  mcp_server_view(std::string name, std::string prefix)
      : name(std::move(name))
      , prefix(std::move(prefix)) {
    // nop
  }

  /// Its name in the config, and the prefix of its tools' gateway names.
  const std::string name;
  const std::string prefix;

  struct snapshot {
    state_kind state = state_kind::starting;
    /// The server's tools as it listed them (each a JSON object with
    /// `name`, as MCP's `Tool`); its resources (each with `uri`), resource
    /// templates (each with `uriTemplate`) and prompts (each with `name`),
    /// for a server that offers them (null: none listed); and a number
    /// that changes with any of these lists.
    std::shared_ptr<const std::vector<nlohmann::json>> tools;
    std::shared_ptr<const std::vector<nlohmann::json>> resources;
    std::shared_ptr<const std::vector<nlohmann::json>> resource_templates;
    std::shared_ptr<const std::vector<nlohmann::json>> prompts;
    uint64_t tools_version = 0;
    /// The protocol revision and `serverInfo` it answered `initialize` with.
    std::string protocol_version;
    nlohmann::json server_info;
    pid_t pid = -1;
    /// Times it was started again after an exit; how it last ended.
    uint64_t restarts = 0;
    std::string last_exit;
  };

  snapshot read() const {
    std::lock_guard<std::mutex> guard{mx_};
    return snap_;
  }

  /// Called (on the source's thread) with the new snapshot whenever the
  /// server's state or process changes (it starts, is ready, is gone).
  using state_listener = std::function<void(const snapshot&)>;

  /// Sets who hears of state changes (null: no one). Once this returns,
  /// the one it replaced is not called any more.
  void on_state_change(state_listener f) const {
    std::lock_guard<std::mutex> guard{listen_mx_};
    listener_ = std::move(f);
  }

  template <class F>
  void update(F f) {
    snapshot after;
    bool changed = false;
    {
      std::lock_guard<std::mutex> guard{mx_};
      auto state = snap_.state;
      auto pid = snap_.pid;
      f(snap_);
      changed = snap_.state != state || snap_.pid != pid;
      if (changed)
        after = snap_;
    }
    if (changed) {
      std::lock_guard<std::mutex> guard{listen_mx_};
      if (listener_)
        listener_(after);
    }
  }

  /// Counters (relaxed).
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> progress{0};
  std::atomic<uint64_t> cancels_sent{0};
  /// Lines from the server that were no JSON-RPC message, or over the
  /// size limit, or answered no request of ours.
  std::atomic<uint64_t> bad_lines{0};

private:
  mutable std::mutex mx_;
  snapshot snap_;
  mutable std::mutex listen_mx_;
  mutable state_listener listener_;
};

std::string_view to_string(mcp_server_view::state_kind x) noexcept;

/// What a tool's `annotations` say of its effects (MCP's defaults where
/// they say nothing, or the tool is no object).
policy::mcp::tool_hints tool_hints_of(const nlohmann::json& tool);

struct mcp_source {
  source_actor actor;
  std::shared_ptr<const mcp_server_view> view;
};

/// Throws `std::invalid_argument` naming the field of a nonsense setting.
void validate(const mcp_server_settings& cfg);

/// Spawns the source of an MCP server: a child it starts (`transport`
/// stdio) or a Streamable HTTP endpoint (`http`). It starts the server at
/// once (and again, with backoff, each time it is gone: the child exited,
/// the HTTP session ended), answers its `initialize`, lists its tools, and
/// its resources, resource templates and prompts if it offers them (each
/// again on its `list_changed`), and answers pings; it refuses the
/// server's other requests (sampling, elicitation, roots: not relayed yet).
///
/// An attempt's payload is a JSON object `{"method": M, "params": P}`, M
/// one of `tools/call` (P naming the server's own tool), `resources/read`
/// and `prompts/get` (reads: always safe to retry). Its reply: `ok` with the
/// JSON-RPC `result` (a tool result with `isError` included: that is the tool's
/// answer); `permanent` with the JSON-RPC `error` object for an error other
/// than an internal one (and for an HTTP 4xx refusal); `transient` for an
/// internal error (-32603), a server that is gone or not ready, an HTTP 5xx,
/// 429 or 503, a transport failure; `timeout` for a call silent past
/// `idle_timeout` (no answer, no progress) or longer than `call_timeout` or the
/// attempt's own timeout. A failure after the request reached the server (or
/// may have) is `unsafe_to_retry` unless the tool says `readOnlyHint` or
/// `idempotentHint` (policy::mcp::may_retry).
/// Progress notifications for the call are counted as progress; when the
/// call carried its client's `progressToken`, each is passed on to
/// `stream_to` as the notification's JSON text. A requester that
/// terminates or sends `cancel_atom` cancels its attempts: the server gets
/// `notifications/cancelled` with its request id.
///
/// Its end (the actor's) stops the server and waits for that, at most
/// `stop_grace` and a second.
mcp_source spawn_mcp_source(caf::actor_system& sys, mcp_server_settings cfg);

/// `spawn_mcp_source` of a stdio server.
mcp_source spawn_mcp_stdio_source(caf::actor_system& sys,
                                  mcp_server_settings cfg);

} // namespace sluice
