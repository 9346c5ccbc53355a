#pragma once

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/runtime/policy/breaker/breaker_mirror.hpp"
#include "sluice/runtime/policy/breaker/breaker_policy.hpp"
#include "sluice/actors/ejections.hpp"

namespace sluice {

/// A handle on one source's circuit breaker: the actor that owns the state
/// machine, and its lock-free mirror for reads from any thread.
///
/// Protocol (see messages/atoms.hpp): `allow_atom -> breaker_verdict`,
/// `(record_atom, call_outcome)`, `subscribe_atom -> breaker_status` (until
/// the subscriber terminates), `status_atom -> breaker_status`, and the
/// operator actions `isolate_atom` (open until reset) and `reset_atom`
/// (close now), each answered with the `breaker_status` it left.
/// Subscribers receive a `breaker_event` for every transition, in order.
/// Told `(probe_gate_atom, relay)` (by the breaker relay, when breakers are
/// shared between nodes), it claims the cluster's probe lease through the
/// relay when its open period ends, and half-opens only if this node got
/// it; otherwise it stays open while another node probes.
struct breaker_handle {
  std::string source;
  caf::actor actor;
  std::shared_ptr<const policy::breaker_mirror> mirror;
  /// Its place in the routes' ejection limits (null: none); retired when a
  /// reload takes its source out.
  std::shared_ptr<shared_ejections::seat> ejection_seat{};

  /// Whether calls to the source are cut off now (one atomic load).
  bool is_open() const noexcept { return mirror->is_open(); }
};

/// A config reload took the breaker's source out: from now on it only
/// serves the calls still draining, telling its subscribers (the Redis
/// relay, /events) nothing more and claiming no cluster probe lease, since
/// its source's name now belongs to its successor.
void retire_breaker(const caf::actor& breaker);

/// A config reload's new settings for a running breaker
/// (`policy::breaker_policy::reconfigure`): its state, generation and open
/// period stay, its window starts anew. Throws `std::invalid_argument`
/// naming the field of nonsense settings, before sending anything.
void reconfigure_breaker(const caf::actor& breaker,
                         const policy::breaker_config& cfg);

/// How long a breaker shared with other nodes waits for the relay's answer
/// to its claim of the cluster's probe lease before it decides alone.
constexpr duration probe_claim_timeout = std::chrono::seconds{2};

/// Spawns the breaker of `source`. Throws `std::invalid_argument` naming the
/// field if `cfg` is nonsense. With `ejections`, an opening by the window
/// asks the routes' ejection limits first (refused: the breaker stays
/// closed, held), and every transition is counted there.
breaker_handle
spawn_breaker(caf::actor_system& sys, std::string source,
              const policy::breaker_config& cfg,
              std::shared_ptr<shared_ejections> ejections = nullptr);

} // namespace sluice
