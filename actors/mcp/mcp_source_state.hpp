#pragma once

// The state of an MCP server's source actor, private to its two files:
// mcp_source.cpp (the attempts: tool calls, their deadlines, cancelling)
// and mcp_server_link.cpp (the server's life: starting it over its
// channel, initialize, its tools, what it says, restarts).

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/attempt_book.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/mcp/channel.hpp"
#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/actors/mcp/mcp_source.hpp"

namespace sluice::mcp_detail {

using json = nlohmann::json;

// One tool call sent to the server.
struct pending_call {
  caf::response_promise promise;
  caf::actor_addr requester;
  caf::actor stream_to;
  uint64_t stream_tag = 0;
  /// The progressToken sent (JSON text, always ours), and the client's
  /// when it asked for progress (its notifications are passed on).
  std::string token;
  bool relay = false;
  json client_token;
  policy::mcp::tool_hints hints;
  /// Written to the server (else it waits for the server to be ready),
  /// and the channel's exchange that carries it. `line` is kept until the
  /// call ends: a call whose session was gone before the server saw it is
  /// sent again on the next one, at most `max_session_resends` times.
  bool written = false;
  uint64_t exchange = 0;
  std::string line;
  uint32_t resends = 0;
  time_point sent{};
  bool progressed = false;
  std::optional<time_point> attempt_deadline;
  time_point deadline{};
  /// When its one pending timer fires (none: not armed).
  std::optional<time_point> timer_at;
};

/// Times one call is sent again because its session was gone (HTTP 404,
/// the connection refused) before the server saw it: a server restarting
/// is waited for, one that loses every session is not chased for ever.
constexpr uint32_t max_session_resends = 2;

/// The most pages read in one listing (a server whose cursor
/// never ends is not followed for ever).
constexpr size_t max_tool_pages = 64;

/// The most items kept of one server's list (tools, resources, ...).
constexpr size_t max_server_tools = 4096;

/// The largest item kept (a tool with its schemas), and the most bytes of
/// one list: the merged lists are copied into every answer.
constexpr size_t max_list_item_bytes = 256 * 1024;
constexpr size_t max_list_bytes = 8u << 20;

/// What the source lists of its server, each kept in the view.
enum class list_kind : uint8_t { tools, resources, templates, prompts };
constexpr size_t list_kinds = 4;

/// The most bytes of a server's messages read but not yet handled by its
/// source actor (four of the largest messages): beyond it the channel
/// stops reading, and the server's writes wait in its pipe or socket.
constexpr size_t max_unread_bytes = 4 * mcp::max_message_bytes;

/// A listing in progress (paged by cursors), and whether another must
/// follow it (a list_changed came meanwhile).
struct listing {
  std::vector<json> items;
  size_t bytes = 0; // of the items, as JSON text
  size_t pages = 0;
  bool busy = false;
  bool again = false;
};

/// A request of the source's own: initialize, or a listing.
struct internal_request {
  bool initialize = false;
  list_kind list = list_kind::tools;
};

struct mcp_state {
  mcp_server_settings cfg;
  std::shared_ptr<mcp_server_view> view;
  std::unique_ptr<upstream::io_thread> io;
  /// Lives on the I/O loop: touched only by what is posted there.
  std::shared_ptr<mcp::channel> link;
  /// Which start of the server the I/O's messages belong to.
  uint64_t gen = 0;
  bool ready = false;
  bool ever_ready_this_gen = false;
  uint32_t failed_starts = 0;
  uint64_t next_id = 1;
  /// The number of the next exchange on the channel.
  uint64_t next_exchange = 1;
  attempt_book<pending_call> calls;
  std::unordered_map<std::string, uint64_t> by_token;
  std::unordered_map<uint64_t, internal_request> internal;
  std::array<listing, list_kinds> lists;

  /// Stops the server (a child: SIGTERM, SIGKILL after `stop_grace`; HTTP:
  /// its session DELETEd) and waits for that, at most `stop_grace` and a
  /// second: the node's stop and a reload that removes it leave no server
  /// behind.
  ~mcp_state();

  static inline const char* name = "sluice.mcp_source";
};

using mcp_actor = caf::stateful_actor<mcp_state>;

log_limit& server_log_limit();

// -- mcp_server_link.cpp
// ---------------------------------------------------------

/// Starts the server (a child, or a channel to its URL) and initializes it.
void start_server(mcp_actor* self);

/// Sends `text` on the current channel; `on_end` (in the actor) hears how
/// its exchange ended, after the answers it brought (never for a stale
/// start; a stdio write only when it was refused). Returns the exchange's
/// id.
uint64_t send_text(mcp_actor* self, std::string text,
                   std::function<void(mcp_actor*, mcp::send_outcome)> on_end,
                   duration timeout = duration::zero());

/// Drops exchange `id` of the current channel.
void cancel_exchange(mcp_actor* self, uint64_t id);

// -- mcp_source.cpp
// --------------------------------------------------------------

/// Writes call `id` to the server (it was waiting for it to be ready).
void write_call(mcp_actor* self, uint64_t id);

/// Ends call `id` with `r` (nothing if it ended already).
void end_call(mcp_actor* self, uint64_t id, source_reply r);

/// A call failed: retried only if that is safe (SPEC §13), by how far it
/// got (`how`, or by whether it was written when not given).
void fail_call(mcp_actor* self, uint64_t id, policy::outcome_kind kind,
               int code, const std::string& message, std::string reason,
               std::optional<policy::mcp::delivery> how = std::nullopt);

/// A JSON-RPC answer (result or error) to call `id`.
void on_call_answer(mcp_actor* self, uint64_t id, const mcp::message& m);

/// A progress notification from the server.
void on_progress(mcp_actor* self, const mcp::message& m);

} // namespace sluice::mcp_detail
