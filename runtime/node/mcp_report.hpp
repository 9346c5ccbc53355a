#pragma once

// What operators see of the MCP gateway (SPEC §13): the servers in
// /status and /metrics, their state changes on /events.

#include <nlohmann/json.hpp>

#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/node/metrics.hpp"

namespace sluice::node {

/// `/status` `mcp`: each server (state, process, restarts, lists,
/// counters) and the sessions. Its breaker and tiers are in `sources`,
/// under `mcp:NAME`.
nlohmann::json mcp_status(front_state& front);

/// The servers' gauges and counters on /metrics (their calls by tool are
/// `node_metrics`').
void write_mcp_metrics(prom_text& out, front_state& front);

/// Publishes each server's state changes on /events (`event:
/// mcp_server`) from now until `stop_mcp_events`.
void start_mcp_events(front_state& front);
void stop_mcp_events(front_state& front);

} // namespace sluice::node
