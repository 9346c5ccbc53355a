#pragma once

// The protocol between Sluice actors: atoms and type IDs. Written with CAF's
// type-ID block macros, which 0.17.6 accepts and 0.18+ requires.

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/admission.hpp"
#include "runtime/policy/time.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(sluice, caf::first_custom_type_id)

// -- admission ------------------------------------------------------------

/// `(acquire_atom, time_point deadline) -> permit_id`: ask a tier owner for
/// a permit for the sender, waiting FIFO until `deadline` at the latest.
/// Fails with `tool_busy` naming the tier.
CAF_ADD_ATOM(sluice, sluice, acquire_atom, "acquire")

/// `(wake_atom)`: a permit came back while waiters were queued.
CAF_ADD_ATOM(sluice, sluice, wake_atom, "wake")

/// `(expire_atom, uint64_t waiter)`: the deadline timer of one waiter.
/// Stale timers (the waiter already left) are ignored.
CAF_ADD_ATOM(sluice, sluice, expire_atom, "expire")

/// `(status_atom) -> tier_status`: current counts of a tier.
CAF_ADD_ATOM(sluice, sluice, status_atom, "status")

CAF_ADD_TYPE_ID(sluice, (sluice::tier_status))
CAF_ADD_TYPE_ID(sluice, (sluice::time_point))

CAF_END_TYPE_ID_BLOCK(sluice)

// Only ever sent within one process; nodes share state through the backend
// (Redis), not through CAF's network layer.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::tier_status)
