#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/redis/client.hpp"

namespace sluice {

struct breaker_relay_stats {
  /// Transitions of this node's breakers published to the other nodes.
  std::atomic<uint64_t> published{0};
  /// Other nodes' transitions applied to this node's breakers.
  std::atomic<uint64_t> applied{0};
  /// Publishes or subscriptions that failed (Redis unreachable).
  std::atomic<uint64_t> errors{0};
};

/// Spawns this node's breaker relay: it shares breaker state with the other
/// nodes on the same Redis key prefix, through pub/sub on the channel
/// `<prefix>breakers`.
///
/// - Every breaker it is told of (`(watch_atom, std::string source,
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
