#pragma once

// What /status and /metrics show of tokens and spend (SPEC §12): each key's
// and route's limits, what was used or spent against them, what is left.

#include <nlohmann/json.hpp>

#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/node/metrics.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice::node {

/// A key's or a route's tokens and spend against its limits; with Redis,
/// the counts `shared` read there.
nlohmann::json spend_json(const spend_scope& scope, time_point now,
                          wall_time wall, const shared_counts* shared);

/// Every limit as gauges on /metrics (this node's count).
void write_spend_gauges(prom_text& out, front_state& front);

} // namespace sluice::node
