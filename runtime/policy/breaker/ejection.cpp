#include "sluice/runtime/policy/breaker/ejection.hpp"

#include <algorithm>
#include <cmath>

#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::policy {

void validate_max_ejection_percent(double max_percent) {
  if (!(max_percent >= 0 && max_percent <= 100))
    throw field_error("max_ejection_percent", "must be in [0, 100]");
}

void ejection_ledger::add_route(const std::string& route,
                                std::vector<std::string> sources,
                                double max_percent) {
  validate_max_ejection_percent(max_percent);
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  limit l;
  l.allowed = static_cast<uint32_t>(
      std::floor(static_cast<double>(sources.size()) * max_percent / 100.0));
  l.sources = std::move(sources);
  routes_[route] = std::move(l);
}

void ejection_ledger::remove_route(const std::string& route) {
  routes_.erase(route);
}

uint32_t ejection_ledger::ejected_in(const limit& l) const {
  uint32_t n = 0;
  for (auto& s : l.sources)
    n += ejected_.count(s) != 0 ? 1 : 0;
  return n;
}

bool ejection_ledger::try_eject(const std::string& source) {
  if (ejected_.count(source) != 0)
    return true;
  for (auto& [name, l] : routes_) {
    if (!std::binary_search(l.sources.begin(), l.sources.end(), source))
      continue;
    if (ejected_in(l) + 1 > l.allowed) {
      held_.insert(source);
      return false;
    }
  }
  held_.erase(source);
  ejected_.insert(source);
  return true;
}

void ejection_ledger::ejected(const std::string& source) {
  held_.erase(source);
  ejected_.insert(source);
}

void ejection_ledger::restored(const std::string& source) {
  held_.erase(source);
  ejected_.erase(source);
}

bool ejection_ledger::held(const std::string& source) const {
  return held_.count(source) != 0;
}

std::vector<ejection_ledger::route_view> ejection_ledger::routes() const {
  std::vector<route_view> out;
  for (auto& [name, l] : routes_) {
    route_view v;
    v.route = name;
    v.sources = static_cast<uint32_t>(l.sources.size());
    v.ejected = ejected_in(l);
    v.allowed = l.allowed;
    for (auto& s : l.sources)
      if (held_.count(s) != 0)
        v.held.push_back(s);
    out.push_back(std::move(v));
  }
  return out;
}

} // namespace sluice::policy
