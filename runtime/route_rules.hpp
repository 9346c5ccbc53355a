#pragma once

// The rules of a route, in one place: the facade's `add_route` checks a
// route with them, and the config reader calls them on each part of a
// route as it reads it, so that its error names the key and line as
// written.

#include <functional>
#include <string>
#include <vector>

namespace sluice {

struct route_config;

/// Whether a name a route refers to (a call kind, a source) exists.
using name_known = std::function<bool(const std::string&)>;

/// The largest weight a route gives a source: weights are ratios, and one
/// of 1e7 beside 1 is a typo.
constexpr double max_route_weight = 1e6;

/// The rules of one source list of a route (its default, or one model's
/// entry): at least one source, each known, and weights, if any, one per
/// source, each in (0, `max_route_weight`]. Throws `field_error` naming
/// `sources` or `weights`.
void validate_sources(const std::vector<std::string>& sources,
                      const std::vector<double>& weights,
                      const name_known& is_source);

/// The rules of a route: a known kind; a default source list, or model
/// entries, or both, each list by `validate_sources`; weights only with
/// sources. Throws `field_error` naming `kind`, `sources`, `weights` or
/// `models.PATTERN.sources|weights`. (A model pattern's own rules are
/// `policy::model_rules::add`'s.)
void validate(const route_config& r, const name_known& is_kind,
              const name_known& is_source);

} // namespace sluice
