#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/breaker.hpp"
#include "sluice/actors/direct_attempts.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/source/aimd.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"
#include "sluice/runtime/policy/source/token_bucket.hpp"

namespace sluice {

/// A source's rate quota, shared by every governor that calls the source.
/// Taken synchronously under a short lock (no message), like the source
/// tier's permits.
class source_quota {
public:
  source_quota(const policy::quota_config& cfg, time_point now)
      : bucket_(cfg, now) {
    // nop
  }

  bool try_take(time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    return bucket_.try_take(now);
  }

  time_point next_token(time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    return bucket_.next_token(now);
  }

private:
  std::mutex mx_;
  policy::token_bucket bucket_;
};

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
  /// Optional rate quota (null: none).
  std::shared_ptr<source_quota> quota;
  /// A built-in source that times its attempts itself
  /// (`call_request::timeout`) and understands `(cancel_atom)`: governors
  /// ask it directly. Others get each attempt from a short-lived runner
  /// actor that the governor times and kills (see messages/source.hpp).
  bool self_timed = false;
  /// A built-in source on the loop scheduler whose attempts the governor
  /// starts itself on its own loop (expired: ask `actor`).
  std::weak_ptr<direct_attempts> direct;
  /// The upstream's own name for models the clients name (null: none);
  /// the governor rewrites the `model` of each attempt's body with it.
  std::shared_ptr<const std::map<std::string, std::string>> model_names;
  /// Keeps the source in service: once a reload has taken it out of the
  /// runtime, its actors stop when the last copy of this handle (the plans
  /// of calls that started before the reload) is gone (null: the runtime's
  /// destructor stops them).
  std::shared_ptr<const void> lifetime{};
};

/// A config reload's new AIMD settings for a running gate: the limit
/// reached stays, brought into the new [min, max]
/// (`policy::aimd_limit::reconfigure`). Throws `std::invalid_argument`
/// naming the field of nonsense settings, before sending anything.
void reconfigure_gate(const caf::actor& gate, const policy::aimd_config& aimd);

/// Spawns the gate of source `name`: the owner of its AIMD limit (the cap
/// of `tier`), which it moves on each attempt's outcome, and of the
/// watchers it tells when a permit frees. Protocol:
/// - `(aimd_atom, outcome_kind, uint32_t in_flight)`: an attempt ended;
/// - `(watch_atom)`: the sender is told (`wake_atom`) of the next freed
///   permit, once;
/// - `(wake_atom)`: a permit came back outside an outcome;
/// - `(status_atom) -> gate_status`.
/// Throws `std::invalid_argument` naming the field of nonsense `aimd`.
caf::actor spawn_source_gate(caf::actor_system& sys, std::string name,
                             std::shared_ptr<policy::tier_counter> tier,
                             const policy::aimd_config& aimd);

} // namespace sluice
