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
#include "sluice/runtime/redis/peer_message.hpp"

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
  /// Peers' transitions dropped because a later one (by generation) was
  /// applied already: reordered, duplicated, or read in a catch-up first.
  std::atomic<uint64_t> stale{0};
  /// Times the shared state was read after (re)subscribing (catch-up).
  std::atomic<uint64_t> resyncs{0};
  /// Channel messages whose generation was not the next one (a jump, a
  /// repeat, or a source not seen yet): checked against the shared state
  /// instead of applied. A forged message is one of them.
  std::atomic<uint64_t> confirmed{0};
  /// Cluster probe leases this node took (its breaker then half-opened).
  std::atomic<uint64_t> probes_claimed{0};
  /// Open periods that ended while another node held the probe lease: this
  /// node's breaker stayed open until that lease's end.
  std::atomic<uint64_t> probes_deferred{0};
};

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
/// - Each publish is one script: it counts the source's generation up,
///   stores the transition as the source's shared state (open-until on the
///   server's clock), publishes it with its generation, and frees the
///   probe lease if this node held it. A transition whose generation is
///   not above the last one seen for its source is dropped (stale); one
///   heard on the channel that is not the next one is read from the shared
///   state instead (`check_peer_gen`).
/// - Catch-up: after every (re)subscription, and for each breaker when it
///   is first watched, the relay reads the shared state and applies what
///   is newer than what it saw -- a node cut off from Redis while others
///   moved catches up when it is back.
/// - One probe per cluster: a watched breaker is told to claim the probe
///   lease (`<prefix>breakers:probe:<source>`, `SET NX PX` one open
///   period) through the relay (`probe_claim_atom`) when its open period
///   ends; the node that gets it probes, the others stay open until the
///   lease's end (or the prober's verdict reaches them first).
///
/// A node cut off from Redis decides alone (its own window, its own probe)
/// until it is back. Runs on a thread of its own (hiredis blocks).
caf::actor spawn_breaker_relay(caf::actor_system& sys, redis_config cfg,
                               std::shared_ptr<breaker_relay_stats> stats =
                                   nullptr);

} // namespace sluice
