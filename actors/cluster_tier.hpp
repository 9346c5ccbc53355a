#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/redis_client.hpp"

namespace sluice {

/// The global tier across nodes: a cap shared by every node through Redis
/// leases (`lease_pool`).
struct cluster_tier_config {
  redis_config redis;
  /// The lease pool's name: nodes with the same name (and key prefix)
  /// share the cap.
  std::string name = "global";
  uint32_t cap = 1024;
  /// A lease lapses this long after its last renewal; holders renew every
  /// third of it. A node killed with -9 loses its permits within one TTL.
  duration lease_ttl = std::chrono::seconds{10};
  /// How often a waiter asks again while the cluster is full.
  duration poll = std::chrono::milliseconds{20};
};

/// Throws `std::invalid_argument` naming the field of nonsense settings.
void validate(const cluster_tier_config& cfg);

struct cluster_tier_stats {
  /// Leases this node holds now.
  std::atomic<int64_t> held{0};
  /// Callers waiting for a lease now.
  std::atomic<int64_t> waiting{0};
  /// Leases found lapsed at renewal (Redis lost them or was unreachable
  /// for longer than a TTL): the cluster may briefly exceed its cap.
  std::atomic<uint64_t> lost{0};
  /// Redis did not answer (each such acquire failed its call closed).
  std::atomic<uint64_t> errors{0};
};

/// Spawns this node's owner of the cluster tier; Redis has a thread of its
/// own (hiredis blocks), the actor never waits on it. Protocol:
/// - `(acquire_atom, time_point deadline) -> std::string lease`: a lease for
///   the sender (monitored: its leases come back when it terminates),
///   waiting FIFO until `deadline`; then `tool_busy` naming `global` if
///   Redis last said the cluster is full. Redis unreachable, failing, or
///   too slow to answer before `deadline` (each command is bounded by it
///   and by the command timeout): `governance_backend_error`
///   (fail-closed), never a busy verdict. After a fault Redis is *down*:
///   acquires fail at once, without queueing, until a PING every
///   `reconnect_after` is answered.
/// - `(lease_release_atom, std::string lease)`: gives a lease back.
caf::actor
spawn_cluster_tier(caf::actor_system& sys, cluster_tier_config cfg,
                   std::shared_ptr<cluster_tier_stats> stats = nullptr);

} // namespace sluice
