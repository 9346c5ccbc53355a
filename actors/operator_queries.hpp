#pragma once

// Short-lived actors that ask other actors on behalf of a caller that is not
// an actor and must never block (the HTTP front's I/O threads): each asks,
// waits for the answers under a timeout, calls back once and quits.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/breaker.hpp"
#include "sluice/messages/call.hpp"

namespace sluice {

/// What `ask_progress_ages` found per scope: the scope's progress age
/// (empty inside: it never progressed), or nothing if the backend did not
/// answer in time.
using progress_ages = std::map<std::string, std::optional<progress_age>>;

/// Asks `backend` (the scope-state protocol, actors/scope_backend.hpp) for
/// the progress age of each of `scopes`, each question bounded by
/// `timeout`; calls `answer` once, on an actor thread, with them all.
void ask_progress_ages(caf::actor_system& sys, caf::actor backend,
                       std::vector<std::string> scopes, duration timeout,
                       std::function<void(progress_ages)> answer);

/// What an operator may tell a breaker.
enum class breaker_action { reset, isolate };

/// Tells `breaker` to `action`; calls `answer` once, on an actor thread,
/// with the state it left, or nothing if it did not answer within
/// `timeout`.
void ask_breaker(caf::actor_system& sys, caf::actor breaker,
                 breaker_action action, duration timeout,
                 std::function<void(std::optional<breaker_status>)> answer);

/// Spawns an actor that subscribes to each of `breakers` and calls
/// `on_event` with every transition they broadcast, on its own thread;
/// `on_event` must not throw (what it throws is caught and dropped).
/// `(subscribe_atom, actor breaker)` adds one more (once per breaker).
caf::actor
spawn_breaker_listener(caf::actor_system& sys, std::vector<caf::actor> breakers,
                       std::function<void(const breaker_event&)> on_event);

} // namespace sluice
