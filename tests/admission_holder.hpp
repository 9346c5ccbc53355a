#pragma once

// A stand-in for the call actor (the governor, later): asks for admission
// when told, records what happened, releases when told. Tests drive it with
// anonymous messages and read its report.

#include <array>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "sluice/actors/admission.hpp"

namespace sluice::testing {

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using give_back_atom = caf::atom_constant<caf::atom("giveback")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;

/// What a holder saw. Written by the holder, read by the test.
struct holder_report {
  bool decided = false;
  bool admitted = false;
  caf::error error;
  time_point decided_at{};
  /// The deadline the admitted ticket carries.
  time_point deadline{};
  /// Tiers the holder's ticket holds a permit of, once decided.
  std::array<bool, tier_count> holds{};
  /// The admission in progress (until decided).
  std::shared_ptr<const admission_progress> progress;

  /// Whether the holder holds a permit of tier `k` right now.
  bool holding(tier_kind k) const {
    if (!decided)
      return progress && progress->holds(k);
    return holds[static_cast<size_t>(k)];
  }

  /// The tier the holder is queued at, if it is waiting.
  std::optional<tier_kind> waiting_on() const {
    if (decided || !progress)
      return std::nullopt;
    return progress->waiting_on();
  }

  /// The tier the holder was rejected on, if it got `tool_busy`.
  std::optional<tier_kind> busy() const { return busy_tier(error); }
};

struct holder {
  caf::actor actor;
  std::shared_ptr<holder_report> report;
};

/// Several sessions and connections over one global tier, for tests with
/// many holders spread over many tiers.
struct tier_grid {
  std::vector<tier_handle> sessions;
  std::vector<tier_handle> connections;
  tier_handle global;
  /// Every tier above, sessions first.
  std::vector<tier_handle> all;

  static tier_grid spawn(caf::actor_system& sys, size_t n_sessions,
                         uint32_t session_cap, size_t n_connections,
                         uint32_t connection_cap, uint32_t global_cap);
};

/// Spawns a holder for `path`. On `ask_atom` it calls `admit`; on
/// `give_back_atom` it releases its ticket (and stays alive); on
/// `finish_atom` it releases and quits.
holder spawn_holder(caf::actor_system& sys, admission_path path,
                    duration wait_timeout);

} // namespace sluice::testing
