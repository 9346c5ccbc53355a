#pragma once

// Which of the node's endpoints a request is for, from its target and
// method: the dispatch of Beast's `handle_request`, apart from the session
// that reads and writes. Pure: whether a call route exists is asked of the
// caller.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/verb.hpp>

#include "sluice/runtime/node/refusal.hpp"

namespace sluice::node {

enum class endpoint {
  /// GET /healthz.
  healthz,
  /// POST /admin/... (`arg`: the path after "/admin/").
  admin_action,
  /// GET /status.
  status,
  /// GET /events.
  events,
  /// GET /metrics.
  metrics,
  /// GET /dashboard (`arg` empty) or /dashboard/NAME (`arg`: NAME).
  dashboard,
  /// GET /v1/models (`arg` empty) or /v1/models/ID (`arg`: ID, decoded).
  models,
  /// POST on a configured call route (`arg`: the path).
  call,
  /// /mcp, any method (the MCP gateway answers the method itself).
  mcp,
};

/// Where a request goes, or why it is refused (400, 404 or 405; the
/// connection stays open).
struct endpoint_choice : refusal {
  endpoint to = endpoint::healthz;
  std::string arg;
};

/// The endpoint of a request to `target` with `method`. The admin listener
/// serves only /healthz and the operations endpoints (the dashboard too). `has_route` tells
/// whether a path is a configured call route.
endpoint_choice
choose_endpoint(std::string_view target, boost::beast::http::verb method,
                bool on_admin_listener,
                const std::function<bool(const std::string&)>& has_route);

} // namespace sluice::node
