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

/// The largest message on the channel the relay reads; longer ones are
/// skipped unread (a transition is ~150 bytes). NOTE: hiredis still
/// receives a longer message whole before it can be skipped; Redis bounds
/// it (`proto-max-bulk-len`).
constexpr size_t max_peer_message = 4096;

/// The longest open period a peer's message may ask for: a year, in ms.
constexpr int64_t max_peer_open_ms = int64_t{365} * 24 * 3600 * 1000;

/// The largest generation a message may carry (2^53: generations are the
/// server's clock in µs plus a count, far below).
constexpr uint64_t max_peer_gen = uint64_t{1} << 53;

/// A node's transition, as the relay reads it off the channel or from the
/// shared state (`<prefix>breakers:state`, one entry per source: the last
/// transition published).
struct peer_message {
  std::string node;
  std::string source;
  breaker_state to = breaker_state::closed;
  /// For an opening: how long it stays open, in [0, max_peer_open_ms].
  duration open_for{};
  /// The source's shared generation, counted up by Redis at each publish
  /// (0: a message without one, from a node before generations).
  uint64_t gen = 0;
  /// For an opening: until when, on the Redis server's clock (Unix ms; 0
  /// when absent). What a catch-up reads, when `open_for` is old.
  int64_t until_ms = 0;
};

/// Reads one message from the channel or the shared state: a transition of
/// another node's breaker, or nothing if it is malformed (not JSON, a field
/// missing or of the wrong type, a state other than open or closed, no
/// source) or from `own_node` (empty: from any node). Never throws on any
/// input (except `std::bad_alloc`).
std::optional<peer_message> parse_peer_message(std::string_view payload,
                                               std::string_view own_node);



/// What a channel message's generation says, against the last one this
/// node saw for its source.
enum class peer_gen_check {
  /// Not above the last one: dropped.
  stale,
  /// Exactly the next: the publish script counts up by one, so this is the
  /// transition that followed the last one seen. Applied as heard.
  next,
  /// Anything else -- a jump, the same generation again, a source with no
  /// generation seen yet: taken from the shared state, not from the
  /// message. Anyone who may PUBLISH on the channel can send any number; a
  /// forged jump (2^53) believed would make this node drop every real
  /// transition of the source as stale.
  confirm,
};

/// `last`: the last generation seen for the source (nothing: none yet);
/// `gen`: the message's (not 0: a message without one has no order).
peer_gen_check check_peer_gen(std::optional<uint64_t> last,
                              uint64_t gen) noexcept;

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
