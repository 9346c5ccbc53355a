#pragma once

// What the breaker relay reads from other nodes, without actors or Redis:
// one transition off the channel or the shared state, and the order of its
// generation against the last one seen.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/messages/breaker.hpp"

namespace sluice {

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

} // namespace sluice
