#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sluice::policy {

/// Throws `field_error` naming `max_ejection_percent` unless it is in
/// [0, 100].
void validate_max_ejection_percent(double max_percent);

/// Ejection limits (Envoy's `max_ejection_percent`): per route, at most a
/// share of its sources may be taken out by their breakers at once, so
/// failures spread over a route's sources never leave it with none.
///
/// A source is *ejected* while its breaker is not closed, whatever opened
/// it. Only an opening by the source's own failures (the breaker's window)
/// is limited: it asks `try_eject` first, and a refused source stays in
/// service, *held*, until a slot frees (another source's breaker closes)
/// or its failures stop. Operator isolation, a peer node's opening and an
/// upstream's Retry-After are obeyed and counted, never refused.
///
/// Not thread-safe: the breakers of a runtime share one behind a mutex
/// (`shared_ejections`, actors/ejections.hpp); it is asked only when a
/// breaker would open or changes state.
class ejection_ledger {
public:
  /// Limits the route `route` over `sources`: at most floor(`max_percent`
  /// × sources / 100) of them ejected at once (a route of one source and
  /// a limit under 100 % never ejects it). `max_percent` in [0, 100]
  /// (throws `field_error` naming `max_ejection_percent`). A route added
  /// again replaces its limit.
  void add_route(const std::string& route, std::vector<std::string> sources,
                 double max_percent);

  /// Forgets a route's limit (a reload removed the route).
  void remove_route(const std::string& route);

  /// `source`'s breaker would open by its own failures: true (and counted
  /// ejected) unless that takes a route of its past its limit; false
  /// marks it held.
  bool try_eject(const std::string& source);

  /// `source`'s breaker left closed by other means: counted, not refused.
  void ejected(const std::string& source);

  /// `source`'s breaker closed again (or its failures stopped while held).
  void restored(const std::string& source);

  /// Whether `source` is held in service past a route's limit.
  bool held(const std::string& source) const;

  /// One limited route, as `/status` shows it.
  struct route_view {
    std::string route;
    uint32_t sources = 0;
    uint32_t ejected = 0;
    uint32_t allowed = 0;
    /// Sources kept in service past the limit.
    std::vector<std::string> held;
  };

  std::vector<route_view> routes() const;

private:
  struct limit {
    std::vector<std::string> sources;
    uint32_t allowed = 0;
  };

  uint32_t ejected_in(const limit& l) const;

  std::map<std::string, limit> routes_;
  std::set<std::string> ejected_;
  std::set<std::string> held_;
};

} // namespace sluice::policy
