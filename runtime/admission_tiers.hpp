#pragma once

#include "sluice/actors/admission.hpp"
#include "sluice/runtime/admission_config.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace sluice {

/// The runtime's side of admission: owns the process-global tier and makes
/// session and connection tiers with the configured caps.
class admission_tiers {
public:
  /// Validates `cfg` (throws `std::invalid_argument("FIELD: problem")`)
  /// and spawns the global tier.
  admission_tiers(caf::actor_system& sys, admission_config cfg);

  const admission_config& config() const noexcept { return cfg_; }

  /// The process-global tier shared by every call.
  const tier_handle& global() const noexcept { return global_; }

  /// A tier for a new session (`session_cap` permits).
  tier_handle new_session() const;

  /// A tier for a new client connection (`connection_cap` permits).
  tier_handle new_connection() const;

  /// A session-kind tier with a cap of its own (a client key's: see
  /// `call_options::session_tier`); 1 <= cap <= 2^31 - 1.
  tier_handle new_tier(uint32_t cap) const;

  /// The path of a call made in `session` over `connection`.
  admission_path path(tier_handle session, tier_handle connection) const {
    return {std::move(session), std::move(connection), global_};
  }

private:
  caf::actor_system& sys_;
  admission_config cfg_;
  tier_handle global_;
};

} // namespace sluice
