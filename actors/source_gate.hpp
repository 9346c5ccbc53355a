#pragma once

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/breaker.hpp"
#include "messages/source.hpp"
#include "runtime/policy/aimd.hpp"
#include "runtime/policy/tier_counter.hpp"

namespace sluice {

/// Everything the runtime keeps for one source: the source actor, its
/// breaker, and its source tier -- a concurrency cap moved by AIMD, taken
/// lock-free like an admission tier (no queue: a governor that finds it full
/// tries another source or waits, which is stall time).
struct source_handle {
  std::string name;
  source_actor actor;
  breaker_handle breaker;
  /// Permits of the source tier; its cap is the AIMD limit.
  std::shared_ptr<policy::tier_counter> tier;
  /// Owns the AIMD limit; tells watchers when a permit frees.
  caf::actor gate;
};

/// Spawns the gate of source `name` (AIMD limit, permit watchers) and
/// assembles its handle. Throws `std::invalid_argument` naming the field of
/// nonsense `aimd` or `breaker` settings.
source_handle make_source(caf::actor_system& sys, std::string name,
                          source_actor actor,
                          const policy::breaker_config& breaker,
                          const policy::aimd_config& aimd);

} // namespace sluice
