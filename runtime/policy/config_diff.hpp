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
  /// Names the new config no longer has: retired.
  std::vector<std::string> removed;

  /// Nothing added, replaced or removed.
  bool unchanged() const noexcept {
    return added.empty() && replaced.empty() && removed.empty();
  }
};

/// Name -> fingerprint.
using fingerprints = std::map<std::string, std::string>;

/// Compares two sets by name, then by fingerprint. Each list is sorted.
named_diff diff_named(const fingerprints& before, const fingerprints& after);

/// A whole reload: the sources' and the routes' changes.
struct reload_diff {
  named_diff sources;
  named_diff routes;
};

/// The rule of a reload, in one place. Sources are compared by their
/// fingerprints. A route is replaced when its own fingerprint changed (its
/// table, or its kind's policy, which the caller folds into it) *or* when
/// a source it names in the new config is replaced (its plan would still
/// point at the retired one); otherwise it is kept, plans and retry budget
/// included. `route_sources`: each route of the new config -> every source
/// it names (its fallback list and its model entries').
reload_diff
plan_reload(const fingerprints& sources_before,
            const fingerprints& sources_after,
            const fingerprints& routes_before, const fingerprints& routes_after,
            const std::map<std::string, std::vector<std::string>>& route_sources);

} // namespace sluice::policy
