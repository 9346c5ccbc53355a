#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sluice/runtime/policy/breaker/breaker_policy.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

using policy::breaker_state;
using policy::outcome_kind;

/// Identifies a half-open probe lease; never reused by a breaker. 0 means
/// "no lease" (a call admitted while closed).
using lease_id = uint64_t;

/// The breaker's answer to "may this call go?".
struct breaker_verdict {
  enum class decision : uint8_t {
    /// Closed: go, and report the outcome under `generation`.
    go,
    /// Half-open: go as the probe, holding `lease`.
    probe,
    /// Open, or half-open with every probe lease taken.
    rejected,
  };

  decision what = decision::rejected;
  uint64_t generation = 0;
  lease_id lease = 0;
  /// When rejected: the earliest instant it is worth asking again (the end
  /// of the open period, or of the oldest probe lease).
  time_point retry_at{};

  bool may_go() const noexcept { return what != decision::rejected; }
};

/// The outcome of a call, reported back to the breaker that let it go.
struct call_outcome {
  /// The generation and lease from the call's `breaker_verdict`.
  uint64_t generation = 0;
  lease_id lease = 0;
  outcome_kind kind = outcome_kind::ok;
  /// How long the attempt took (for the slow-call rule).
  duration elapsed{};
  /// "Not before" given by the upstream (Retry-After on a 503).
  std::optional<time_point> retry_after;
};

/// What a claim of the cluster's probe lease for a source answered, in the
/// reply to `(probe_claim_atom, std::string source, duration ttl)`: zero
/// when this node took it (it probes), the time the holder's lease has
/// left when another node holds it (stay open that long), negative when
/// Redis did not answer (decide alone, as without Redis).
constexpr duration probe_claim_unanswered = duration{-1};

/// One state transition, broadcast to every subscriber in order.
struct breaker_event {
  std::string source;
  breaker_state from;
  breaker_state to;
  /// The generation the transition entered.
  uint64_t generation;
  time_point at;
  /// Entering open: for how long (until half-open).
  duration open_for{};
  /// Applied from another node (Redis pub/sub), not decided here: not to be
  /// published again.
  bool from_peer = false;
};

/// A breaker's current state, as `status_atom` reports it.
struct breaker_status {
  std::string source;
  breaker_state state;
  uint64_t generation;
  /// Meaningful while open.
  time_point open_until;
  /// Opened by an operator; stays open until reset.
  bool isolated;
  uint32_t window_calls;
  uint32_t window_failures;
  uint32_t leases_held;
  uint32_t subscribers;
};

/// New settings for a running breaker, in `(breaker_settings)` from
/// `reconfigure_breaker` (a config reload).
struct breaker_settings {
  policy::breaker_config config;
};

} // namespace sluice
