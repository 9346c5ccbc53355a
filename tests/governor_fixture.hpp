#pragma once

// Support for governor tests: a route of simulated sources, admission tiers,
// and a client actor per call that records the reply (or the cancellation).

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>

#include "sluice/actors/governor.hpp"
#include "sluice/actors/simulated_source.hpp"
#include "virtual_time.hpp"

namespace sluice::testing {

/// What one call's client saw.
struct call_report {
  std::optional<call_result> result;
  /// The governor terminated without replying (cancelled).
  bool cancelled = false;
  time_point done_at{};
  /// Stream chunks of a streamed call, with their arrival times.
  std::vector<std::pair<time_point, std::string>> chunks;
};

struct governed_call {
  caf::actor governor;
  /// Kept here: an actor nobody references is terminated as unreachable, and
  /// the client must live to see its governor end.
  caf::actor client;
  std::shared_ptr<call_report> report;

  bool done() const { return report->result.has_value(); }

  const call_result& result() const { return *report->result; }
};

/// One source of a test route.
struct test_source {
  std::string name;
  sim_config sim;
  policy::breaker_config breaker;
  policy::aimd_config aimd;
  std::optional<policy::quota_config> quota;
};

struct governor_fixture : virtual_time_fixture {
  governor_fixture();

  /// Builds the route (sources spawned now, their scripts start now).
  void make_route(std::vector<test_source> sources, policy::call_policy policy);

  /// Starts a call on the route through fresh session and connection tiers.
  governed_call call(uint64_t seed = 1);

  /// Starts a call through the given admission path.
  governed_call call(admission_path path, uint64_t seed = 1);

  /// Advances virtual time until `c` is done or `limit` passes.
  void run_until_done(const governed_call& c, duration limit);

  const sim_stats& stats(size_t source) const { return *sims.at(source).stats; }

  const source_handle& source(size_t i) const { return route->sources.at(i); }

  admission_path fresh_path();

  /// Reports one failed call to source `i`'s breaker (as if a call had
  /// failed there), and lets the breaker process it.
  void record_failure(size_t i);

  tier_handle global;
  caf::actor backend;
  /// Calls made from now on are streamed calls.
  bool stream_calls = false;
  duration wait_timeout = std::chrono::seconds{3};
  std::vector<simulated_source> sims;
  std::shared_ptr<route_plan> route;
};

/// A breaker that opens only on a long run of failures (tests that are not
/// about the breaker).
policy::breaker_config lenient_breaker();

} // namespace sluice::testing
