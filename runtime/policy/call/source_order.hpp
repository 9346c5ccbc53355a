#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "sluice/runtime/policy/rng.hpp"

namespace sluice::policy {

/// The order in which one round of a call tries a route's `count` sources.
/// `weights` empty: preference order (0, 1, ...). Otherwise one positive
/// weight per source and a weighted random order (Efraimidis-Spirakis:
/// key u^(1/w), largest first), one draw from `rng` per source in index
/// order. Failover: `last_failed`, the source of the call's last failed
/// attempt, goes last when there is another.
std::vector<size_t> source_order(size_t count,
                                 const std::vector<double>& weights,
                                 std::optional<size_t> last_failed,
                                 small_rng& rng);

} // namespace sluice::policy
