#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/lease_store.hpp"

namespace sluice {

/// The global tier across nodes: a cap shared by every node through a
/// `lease_store` (Redis in a node).
struct cluster_tier_config {
  /// While the cluster is full, the first waiter asks again at the latest
  /// after this: a safety net. It asks at once when the store says another
  /// node freed a permit (`lease_store::on_freed`), and when the earliest
  /// permit would lapse (its holder may have died).
  duration poll = std::chrono::seconds{1};
};

/// Throws `std::invalid_argument` naming the field of nonsense settings.
void validate(const cluster_tier_config& cfg);

struct cluster_tier_stats {
  /// Permits this node holds now.
  std::atomic<int64_t> held{0};
  /// Callers waiting for a permit now.
  std::atomic<int64_t> waiting{0};
  /// Permits found lapsed at renewal (the store lost them or was
  /// unreachable for longer than a TTL): the cluster may briefly exceed its
  /// cap (NOTE: deliberate; the holders' calls go on).
  std::atomic<uint64_t> lost{0};
  /// The store did not answer (each such acquire failed its call closed).
  std::atomic<uint64_t> errors{0};
  /// Questions asked of the store (each one Redis script in a node).
  std::atomic<uint64_t> asked{0};
  /// Notices that another node freed a permit while the cap was reached.
  std::atomic<uint64_t> woken{0};
};

/// Spawns this node's owner of the cluster tier over `store`; the actor
/// never waits on the store. It renews the permits it holds every third of
/// the store's TTL. Protocol:
/// - `(acquire_atom, time_point deadline) -> std::string permit`: a permit
///   for the sender (monitored while it holds one: its permits come back
///   when it terminates), waiting FIFO until `deadline`; then `tool_busy`
///   naming `global` -- also when the store is up but did not answer before
///   `deadline` (the wait ran out). The store unreachable or failing (it
///   says so in its answer, or is down): `governance_backend_error`
///   (fail-closed), never a busy verdict. While the store is down, acquires
///   fail at once, without queueing. An anonymous sender is refused
///   (`sec::invalid_argument`): nothing could see its permit go.
/// - `(lease_release_atom, std::string permit)`: gives a permit back.
///
/// `detached`: on a thread of its own, for a store whose destruction may
/// block (Redis's joins its thread: at most one command timeout).
caf::actor spawn_cluster_tier(caf::actor_system& sys, cluster_tier_config cfg,
                              std::shared_ptr<lease_store> store,
                              std::shared_ptr<cluster_tier_stats> stats
                              = nullptr,
                              bool detached = false);

} // namespace sluice
