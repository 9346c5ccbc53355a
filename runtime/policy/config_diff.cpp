#include "sluice/runtime/policy/config_diff.hpp"

#include <algorithm>
#include <set>

namespace sluice::policy {

named_diff diff_named(const fingerprints& before, const fingerprints& after) {
  named_diff d;
  for (auto& [name, print] : after) {
    auto i = before.find(name);
    if (i == before.end())
      d.added.push_back(name);
    else if (i->second == print)
      d.kept.push_back(name);
    else
      d.replaced.push_back(name);
  }
  for (auto& [name, print] : before)
    if (after.count(name) == 0)
      d.removed.push_back(name);
  return d; // std::map order: each list sorted
}

named_diff diff_sources(const source_prints& before,
                        const source_prints& after) {
  fingerprints upstream_before;
  fingerprints upstream_after;
  for (auto& [name, p] : before)
    upstream_before[name] = p.upstream;
  for (auto& [name, p] : after)
    upstream_after[name] = p.upstream;
  auto d = diff_named(upstream_before, upstream_after);
  std::vector<std::string> kept;
  for (auto& name : d.kept)
    (before.at(name).tuning == after.at(name).tuning ? kept : d.tuned)
        .push_back(name);
  d.kept = std::move(kept);
  return d;
}

reload_diff
plan_reload(const source_prints& sources_before,
            const source_prints& sources_after,
            const fingerprints& routes_before, const fingerprints& routes_after,
            const std::map<std::string, std::vector<std::string>>& route_sources) {
  reload_diff d;
  d.sources = diff_sources(sources_before, sources_after);
  d.routes = diff_named(routes_before, routes_after);
  std::set<std::string> replaced{d.sources.replaced.begin(),
                                 d.sources.replaced.end()};
  replaced.insert(d.sources.tuned.begin(), d.sources.tuned.end());
  auto names_replaced = [&](const std::string& route) {
    auto i = route_sources.find(route);
    if (i == route_sources.end())
      return false;
    return std::any_of(i->second.begin(), i->second.end(),
                       [&](const std::string& s) { return replaced.count(s); });
  };
  auto& kept = d.routes.kept;
  std::vector<std::string> still_kept;
  for (auto& r : kept)
    if (names_replaced(r))
      d.routes.replaced.push_back(r);
    else
      still_kept.push_back(r);
  kept = std::move(still_kept);
  std::sort(d.routes.replaced.begin(), d.routes.replaced.end());
  return d;
}

} // namespace sluice::policy
