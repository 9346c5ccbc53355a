#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/breaker.hpp"
#include "sluice/runtime/redis/config.hpp"

namespace sluice {

struct breaker_relay_stats {
  /// Transitions of this node's breakers published to the other nodes.
  std::atomic<uint64_t> published{0};
  /// Other nodes' transitions applied to this node's breakers.
  std::atomic<uint64_t> applied{0};
  /// Publishes or subscriptions that failed (Redis unreachable).
  std::atomic<uint64_t> errors{0};
  /// Messages on the channel that were not a peer's transition (malformed,
  /// too large, or this node's own).
  std::atomic<uint64_t> ignored{0};
};

/// The largest message on the channel the relay reads; longer ones are
/// skipped unread (a transition is ~150 bytes). NOTE: hiredis still
/// receives a longer message whole before it can be skipped; Redis bounds
/// it (`proto-max-bulk-len`).
constexpr size_t max_peer_message = 4096;

/// The longest open period a peer's message may ask for: a year, in ms.
constexpr int64_t max_peer_open_ms = int64_t{365} * 24 * 3600 * 1000;

/// A peer's transition, as the relay's listener reads it off the channel.
struct peer_message {
  std::string source;
  breaker_state to = breaker_state::closed;
  /// For an opening: how long it stays open, in [0, max_peer_open_ms].
  duration open_for{};
};

/// Reads one message from the channel: a transition of another node's
/// breaker, or nothing if it is malformed (not JSON, a field missing or of
/// the wrong type, a state other than open or closed, no source) or from
/// `own_node`. Never throws on any input (except `std::bad_alloc`).
std::optional<peer_message> parse_peer_message(std::string_view payload,
                                               std::string_view own_node);

/// Spawns this node's breaker relay: it shares breaker state with the other
/// nodes on the same Redis key prefix, through pub/sub on the channel
/// `<prefix>breakers`.
///
/// - Every breaker it is told of (`(relay_watch_atom, std::string source,
///   caf::actor breaker)`) is subscribed to; when one of them opens or
///   closes by its own decision, the relay publishes the source, the new
///   state and, for an opening, how long it stays open.
/// - A listener thread of its own (a blocking SUBSCRIBE) receives the other
///   nodes' transitions and hands them to the breaker of the same source
///   (`peer_state_atom`), which applies them and broadcasts them locally,
///   marked as from a peer -- those are never published again.
///
/// Best effort: a message published while a node is cut off from Redis is
/// lost for that node (its own breakers still decide for it). Runs on a
/// thread of its own (hiredis blocks).
caf::actor spawn_breaker_relay(caf::actor_system& sys, redis_config cfg,
                               std::shared_ptr<breaker_relay_stats> stats =
                                   nullptr);

} // namespace sluice
