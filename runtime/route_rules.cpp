// The rules of a route, once: the facade's `add_route` checks a route with
// them, and the config reader calls them on each part of a route as it
// reads it, so that its error names the key and line as written.

#include <algorithm>
#include <string>

#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/route_config.hpp"
#include "sluice/runtime/route_rules.hpp"

namespace sluice {

void validate_sources(const std::vector<std::string>& sources,
                      const std::vector<double>& weights,
                      const name_known& is_source) {
  if (sources.empty())
    throw field_error("sources", "needs at least one source");
  for (auto& name : sources)
    if (!is_source(name))
      throw field_error("sources", "unknown source '" + name + "'");
  if (weights.empty())
    return;
  if (weights.size() != sources.size())
    throw field_error("weights", "needs one weight per source");
  for (auto w : weights)
    if (!(w > 0.0 && w <= max_route_weight))
      throw field_error("weights", "must be positive numbers, at most 1e6");
}

void validate(const route_config& r, const name_known& is_kind,
              const name_known& is_source) {
  if (!is_kind(r.kind))
    throw field_error("kind", "unknown call kind '" + r.kind + "'");
  if (r.sources.empty() && r.models.empty())
    throw field_error("sources",
                      "needs at least one source (or a models table)");
  if (!r.sources.empty())
    validate_sources(r.sources, r.weights, is_source);
  else if (!r.weights.empty())
    throw field_error("weights", "needs sources");
  for (auto& m : r.models) {
    try {
      validate_sources(m.sources, m.weights, is_source);
    } catch (const field_error& e) {
      throw field_error("models." + m.pattern + "." + e.field(), e.problem());
    }
  }
}

} // namespace sluice
