#pragma once

#include <cstdint>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/admission.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"

namespace sluice {

/// One admission tier: a lock-free counter for the fast path and an owner
/// actor for everything that needs an actor (the FIFO queue of waiters, their
/// deadline timers, monitoring waiting holders).
///
/// Session, connection and global tiers are the same mechanism with different
/// caps and names; what differs is who holds the handle (a session, a client
/// connection, the runtime).
struct tier_handle {
  tier_kind kind = tier_kind::global;
  std::shared_ptr<policy::tier_counter> counter;
  caf::actor owner;

  /// Current counts, read lock-free from any thread.
  tier_status status() const noexcept;
};

/// Spawns the owner of a new tier with `cap` permits (1 <= cap <= 2^31 - 1).
tier_handle spawn_tier(caf::actor_system& sys, tier_kind kind, uint32_t cap);

/// Spawns a session's tier.
inline tier_handle spawn_session_tier(caf::actor_system& sys, uint32_t cap) {
  return spawn_tier(sys, tier_kind::session, cap);
}

/// Spawns a client connection's tier.
inline tier_handle spawn_connection_tier(caf::actor_system& sys, uint32_t cap) {
  return spawn_tier(sys, tier_kind::connection, cap);
}

/// Spawns the process-global tier.
inline tier_handle spawn_global_tier(caf::actor_system& sys, uint32_t cap) {
  return spawn_tier(sys, tier_kind::global, cap);
}

} // namespace sluice
