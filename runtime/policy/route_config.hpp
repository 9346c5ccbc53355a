#pragma once

// A route's settings, as the facade's `add_route` and the config file take
// them: nothing above policy, so that the route rules (route_rules.hpp)
// and the config reader need not include the runtime.

#include <optional>
#include <string>
#include <vector>

#include "sluice/runtime/policy/call/retry_budget.hpp"

namespace sluice {

/// One entry of a route's model table: calls whose `model` matches
/// `pattern` (an exact name, or a glob such as "gpt-4o*"; see
/// runtime/policy/model_match.hpp) go to these sources.
struct model_route {
  std::string pattern;
  /// Source names, in preference order.
  std::vector<std::string> sources;
  /// Optional weights, one per source.
  std::vector<double> weights;
};

/// A route: which call policy ("kind") governs its calls and which sources
/// serve it.
struct route_config {
  std::string name;
  /// Key into `runtime_config::kinds`.
  std::string kind = "chat";
  /// Source names, in preference order: the route's default, for a call
  /// whose model no entry of `models` matches or that names none. Empty
  /// (only with `models`): such a call is refused.
  std::vector<std::string> sources;
  /// Optional weights, one per source (weighted random order instead).
  std::vector<double> weights;
  /// Scope of progress; default: the route's name. Each model entry's
  /// calls are judged apart: "SCOPE model PATTERN".
  std::string scope;
  /// Routing by the call's model (`call_request::model`).
  std::vector<model_route> models{};
  /// Caps retries in flight to a share of active calls (none: retries are
  /// bounded only per call, by `max_attempts`). The default source list
  /// and each model entry get their own budget.
  std::optional<policy::retry_budget_config> retry_budget{};
  /// At most this share (percent) of each source list's sources may be
  /// taken out by their breakers' own failures at once; beyond it a source
  /// stays in service, held (none: no limit). See policy::ejection_ledger.
  std::optional<double> max_ejection_percent{};
};

/// Why no sources were found for a call.
enum class route_miss {
  none,
  /// No route of that name.
  no_route,
  /// The route routes by model only and the call names none.
  model_required,
  /// The route has no entry for the call's model and no default.
  model_not_found,
};

} // namespace sluice
