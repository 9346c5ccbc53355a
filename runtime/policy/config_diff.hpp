#pragma once

#include <map>
#include <string>
#include <vector>

namespace sluice::policy {

/// What a config reload does to one set of named things (sources, routes,
/// client keys), each known by its name and a fingerprint of its
/// definition (any text that changes whenever the definition does).
struct named_diff {
  /// Same name, same definition: kept as it is, with its state.
  std::vector<std::string> kept;
  /// New names.
  std::vector<std::string> added;
  /// Same name, another definition: built afresh, the old one retired.
  std::vector<std::string> replaced;
  /// Sources only: same name and upstream, other settings of its own
  /// (breaker, AIMD, quota, model names): kept, its state and all, with
  /// the new settings in place.
  std::vector<std::string> tuned;
  /// Names the new config no longer has: retired.
  std::vector<std::string> removed;

  /// Nothing added, replaced or removed.
  bool unchanged() const noexcept {
    return added.empty() && replaced.empty() && removed.empty() &&
           tuned.empty();
  }
};

/// Name -> fingerprint.
using fingerprints = std::map<std::string, std::string>;

/// Compares two sets by name, then by fingerprint. Each list is sorted.
named_diff diff_named(const fingerprints& before, const fingerprints& after);

/// A source's definition in two parts: what reaches its upstream (its type
/// and the settings of its actor: URL, TLS, headers, statuses, the
/// simulation) and what governs it around the actor (breaker, AIMD, quota,
/// model names), which can change in place.
struct source_print {
  std::string upstream;
  std::string tuning;
};

/// Name -> its two parts.
using source_prints = std::map<std::string, source_print>;

/// Sources by name: kept, added, removed; replaced when the upstream part
/// changed; tuned when only the tuning did.
named_diff diff_sources(const source_prints& before, const source_prints& after);

/// A whole reload: the sources' and the routes' changes.
struct reload_diff {
  named_diff sources;
  named_diff routes;
};

/// The rule of a reload, in one place. Sources as `diff_sources`. A route
/// is replaced when its own fingerprint changed (its table, or its kind's
/// policy, which the caller folds into it) *or* when a source it names in
/// the new config is replaced or tuned (its plan would still point at the
/// retired source, or carry the old quota and model names); otherwise it
/// is kept, plans and retry budget included. `route_sources`: each route
/// of the new config -> every source it names (its fallback list and its
/// model entries').
reload_diff
plan_reload(const source_prints& sources_before,
            const source_prints& sources_after,
            const fingerprints& routes_before, const fingerprints& routes_after,
            const std::map<std::string, std::vector<std::string>>& route_sources);

/// Whether a reload keeps a route's built plans (and retry budget) as they
/// run: the plan keeps it (`plan_reload`), it runs, and none of its plans
/// holds a source the reload retires or tunes. A plan holding one would
/// keep the retired source alive for ever, or carry its old quota and
/// model names: then the route is rebuilt, whatever the plan said.
constexpr bool keeps_built_route(bool planned_keep, bool running,
                                 bool holds_changed_source) noexcept {
  return planned_keep && running && !holds_changed_source;
}

} // namespace sluice::policy
