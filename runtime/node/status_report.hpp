#pragma once

// What the operations endpoints show: `GET /status` (JSON), the gauges of
// `GET /metrics`, and the breaker snapshot that opens every `/events`
// stream. Tiers and breakers are read lock-free from their counters and
// mirrors; only the scopes' progress ages are asked of the backend.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sluice/actors/operator_queries.hpp"
#include "sluice/messages/breaker.hpp"
#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/redis/shared_limits.hpp"

namespace sluice::node {

/// Longest wait for the backend's answer about one scope in /status.
constexpr auto status_backend_timeout = std::chrono::seconds{1};

/// Asks the backend for each scope's progress age, never blocking an I/O
/// thread; calls `answer` once (on an actor thread) with
/// `{scope: {"progress_age_s": ...}}`.
void collect_scopes(front_state& front,
                    std::function<void(nlohmann::json)> answer);

/// Slowest recent calls per route shown by /status.
constexpr size_t slowest_calls_shown = 8;

/// Longest wait for a breaker's answer to an operator action.
constexpr auto breaker_action_timeout = std::chrono::seconds{5};

/// Sends `action` to `breaker`; calls `answer` once (on an actor thread)
/// with the state it left, or nothing if the breaker did not answer.
void ask_breaker(front_state& front, caf::actor breaker, breaker_action action,
                 std::function<void(std::optional<breaker_status>)> answer);

/// Who owns a session of the front, for /status: a key's name, or
/// "anonymous".
std::string session_owner(std::string_view session);

/// `/status.config`: the generation running, when and where it was
/// loaded, refused reloads, and the sources still draining.
nlohmann::json config_json(front_state& front);

/// The body of a `POST /admin/reload` that applied the file.
nlohmann::json reload_json(const reload_outcome& r,
                           std::vector<std::string> draining);

/// The body of `GET /healthz`: `{"status":"ok"}`, or, while a source is
/// broken (an actor of it died, a remote source's link is down),
/// `{"status":"degraded","broken_sources":{"NAME":"why"}}`. Always a 200:
/// the node itself serves (its other sources fail over).
nlohmann::json healthz_json(front_state& front);

/// With the Redis backend: what Redis counts in each shared limit, by its
/// name there (`spend_scope::shared`).
using shared_counts = std::map<std::string, shared_limits::counts>;

/// Every key's and route's limits as Redis names them (model scopes
/// included), at most `shared_spend::max_read_limits`.
std::vector<shared_limit> shared_limits_of(front_state& front);

/// The body of `GET /status`; `shared`: Redis's counts, which the `spend`
/// section shows instead of this node's own.
nlohmann::json status_json(front_state& front, nlohmann::json scopes,
                           const shared_counts* shared = nullptr);

/// The body of `GET /metrics` (Prometheus text).
std::string metrics_text(front_state& front);

/// `event: snapshot` with every breaker's state and generation.
std::string breaker_snapshot_frame(front_state& front);

/// One transition as a JSON object's text: source, from, to, generation,
/// at_ms (wall clock).
std::string breaker_event_json(const breaker_event& ev);

/// `event: breaker` for one transition (`json`: `breaker_event_json`).
std::string breaker_event_frame(const std::string& json);

} // namespace sluice::node
