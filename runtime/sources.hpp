#pragma once

#include <memory>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include "sluice/actors/ejections.hpp"
#include "sluice/actors/source_gate.hpp"
#include "sluice/runtime/policy/source/source_settings.hpp"

namespace sluice {

/// Assembles the handle of source `name` around its actor: spawns its
/// breaker and its gate (AIMD limit, permit watchers), makes its source tier
/// and, if asked, its rate quota. Throws `std::invalid_argument` naming the
/// field of nonsense `aimd`, `breaker` or `quota` settings, before it spawns
/// anything. `ejections`: the routes' ejection limits its breaker obeys.
/// `obey_rate_limit_headers`: it keeps the upstream's own limits as its
/// answers say them (`source_headroom`).
source_handle
make_source(caf::actor_system& sys, std::string name, source_actor actor,
            const policy::breaker_config& breaker,
            const policy::aimd_config& aimd,
            const std::optional<policy::quota_config>& quota = std::nullopt,
            bool self_timed = false,
            std::shared_ptr<shared_ejections> ejections = nullptr,
            bool obey_rate_limit_headers = false);

/// Checks the settings a source has around its actor (breaker, AIMD,
/// quota): throws a `config_error` for the first nonsense one under its key
/// `key.breaker.FIELD`, `key.aimd.FIELD` or `key.quota.FIELD` (at a
/// source's start and when a reload tunes it).
void validate_source_settings(const std::string& key, const source_settings& s);

} // namespace sluice
