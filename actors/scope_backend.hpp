#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

namespace sluice {

/// Spawns the in-process scope-state backend (the default). Protocol:
/// - `(progress_atom, std::string scope)`: a call in `scope` succeeded.
/// - `(progress_age_atom, std::string scope) -> progress_age`: time since
///   the scope last progressed; empty (+infinity) if it never did.
/// Any other backend answering the same protocol can replace it; a backend
/// that errs or does not answer in time makes the call fail closed
/// (`governance_backend_error`).
caf::actor spawn_local_scope_backend(caf::actor_system& sys);

} // namespace sluice
