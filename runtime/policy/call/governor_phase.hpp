#pragma once

#include <cstdint>
#include <string_view>

namespace sluice::policy {

/// Where one governed call is (SPEC §3's loop). A governor is in exactly
/// one phase; `may_enter` is the one table of its moves.
enum class governor_phase : uint8_t {
  /// Spawned, `call_atom` not yet seen.
  idle,
  /// Local tiers, then the cluster tier, under one deadline.
  admitting,
  /// A round over the sources: breaker mirror, source tier, quota, the
  /// breaker's answer; at its end the stall check before a wait.
  choosing,
  /// One attempt in flight.
  attempting,
  /// The backoff timer after a failed attempt (then, after a 429, the
  /// stall check).
  backing_off,
  /// No source could take the call: the poll timer, or an early wake by a
  /// breaker event or a freed permit.
  waiting,
  /// The result went out.
  finished,
};

std::string_view to_string(governor_phase x) noexcept;

/// Whether a governor in `from` may move to `to`. Every call ends in
/// `finished`, and nothing leaves it; a wait and a backoff always end in a
/// new round.
bool may_enter(governor_phase from, governor_phase to) noexcept;

} // namespace sluice::policy
