#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/admission.hpp"
#include "sluice/actors/source_gate.hpp"
#include "sluice/messages/call.hpp"
#include "sluice/runtime/policy/call/call_policy.hpp"
#include "sluice/runtime/policy/call/retry_budget.hpp"

namespace sluice {

/// What every call on one route shares: its sources, its call policy, its
/// scope and the backend that holds the scope's progress. Immutable once
/// built; governors hold it by `shared_ptr`.
struct route_plan {
  std::string name;
  /// Names this source list in /status: the route's name, or "ROUTE model
  /// PATTERN" for one of its model entries.
  std::string label;
  /// Calls whose progress is judged together (default: the route's name).
  std::string scope;
  /// In preference order.
  std::vector<source_handle> sources;
  /// Empty: try sources in preference order. Otherwise one positive weight
  /// per source: each round orders them by weighted random draw.
  std::vector<double> weights;
  policy::call_policy policy;
  /// The scope-state backend (see actors/scope_backend.hpp).
  caf::actor backend;
  /// Longest wait for the backend; past it the call fails closed.
  duration backend_timeout = std::chrono::seconds{2};
  /// When a governor of this route last told the backend of progress (the
  /// clock's ticks; INT64_MIN: never). Progress is written at most once per
  /// `policy::progress_interval` per route: a marker read against stall windows of
  /// seconds or more needs no more, and one message per successful call
  /// was a sixth of a governed call's messages.
  std::shared_ptr<std::atomic<int64_t>> last_progress =
      std::make_shared<std::atomic<int64_t>>(INT64_MIN);
  /// Caps the retries its calls have in flight (null: no cap). Shared by
  /// the governors of this plan only: each model entry of a route has its
  /// own, as it has its own sources and scope.
  std::shared_ptr<policy::retry_budget> retry_budget;
};

/// Everything one governor needs.
struct governor_config {
  call_request request;
  admission_path admission;
  duration wait_timeout = std::chrono::seconds{3};
  std::shared_ptr<const route_plan> route;
  /// Seeds the governor's jitter and weighted order (deterministic tests).
  uint64_t seed = 0;
  /// Callback form (no requester actor): called once, on the governor's
  /// thread, with the result -- or with `call_status::cancelled` if the
  /// governor terminates without one. Start such a governor with an
  /// anonymous `call_atom`, or spawn it with `start_at_once`.
  std::function<void(call_result)> on_done;
  /// With `on_done`: each piece of a streamed answer, before the result.
  std::function<void(std::string)> on_chunk;
  /// With `on_done`: the governor starts the call itself as it starts, as
  /// if sent an anonymous `call_atom` first (one message less per call; a
  /// `call_atom` sent anyway is refused).
  bool start_at_once = false;
  /// The global tier across nodes (see actors/cluster_tier.hpp), asked
  /// after the local tiers under the same admission deadline; null: none.
  caf::actor cluster;
};

/// Spawns the governor of one call (SPEC §3). Send it `call_atom` to start;
/// it replies once with a `call_result` and quits.
///
/// The loop: admission (session -> connection -> global, one deadline) ->
/// pick a runnable source (breaker not open, a source-tier permit, the
/// breaker's go or probe lease) -> attempt (productive time, bounded by
/// `attempt_timeout`) -> outcome to breaker, AIMD and scope progress ->
/// success, fail fast (permanent), back off and retry, wait for a source, or
/// a verdict (`retry_exhausted`, `stalled`). A round after a failed attempt
/// is a retry: with the route's `retry_budget` it first takes a retry slot,
/// or waits for one (unproductive time), or ends (`retry_budget`).
///
/// Streamed calls (`request.stream`): each attempt asks its source to stream
/// to the governor, which passes the current attempt's bytes on to the
/// caller as `(stream_chunk_atom, std::string)`, all before the result.
/// Retries and failover stop with the first byte passed on; the policy's
/// `ttft_timeout` bounds the wait for it, `attempt_timeout` the whole stream.
///
/// **Cancellation is termination**: kill the governor and its admission
/// permits, source permit, probe lease and in-flight attempt all come back
/// (each owner observes it; the attempt's runner is linked to it). Its
/// promise then vanishes: a caller waiting for the reply must monitor it.
caf::actor spawn_governor(caf::actor_system& sys, governor_config cfg);

} // namespace sluice
