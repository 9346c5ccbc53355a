#pragma once

// The protocol between Sluice actors: atoms and type IDs. Written with CAF's
// type-ID block macros, which 0.17.6 accepts and 0.18+ requires.

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "messages/admission.hpp"
#include "messages/breaker.hpp"
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

// -- breakers ---------------------------------------------------------------

/// `(allow_atom) -> breaker_verdict`: may the sender's call go now? A probe
/// lease in the verdict is held by the sender (monitored).
CAF_ADD_ATOM(sluice, sluice, allow_atom, "allow")

/// `(record_atom, call_outcome)`: the outcome of a call the breaker let go.
CAF_ADD_ATOM(sluice, sluice, record_atom, "record")

/// `(subscribe_atom) -> breaker_status`: send every transition to the sender
/// from now on (monitored; dropped when it dies). Replies with the state the
/// subscription starts from.
CAF_ADD_ATOM(sluice, sluice, subscribe_atom, "bsubscribe")

/// `(unsubscribe_atom)`: stop sending transitions to the sender.
CAF_ADD_ATOM(sluice, sluice, unsubscribe_atom, "bunsub")

/// `(isolate_atom)`: operator action, open and stay open until reset.
CAF_ADD_ATOM(sluice, sluice, isolate_atom, "bisolate")

/// `(reset_atom)`: operator action, close now with a cleared window.
CAF_ADD_ATOM(sluice, sluice, reset_atom, "breset")

/// `(half_open_atom, uint64_t generation)`: the open period's timer.
CAF_ADD_ATOM(sluice, sluice, half_open_atom, "halfopen")

/// `(lease_expire_atom, lease_id)`: a probe lease's timer.
CAF_ADD_ATOM(sluice, sluice, lease_expire_atom, "leaseexp")

CAF_ADD_TYPE_ID(sluice, (sluice::tier_status))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_verdict))
CAF_ADD_TYPE_ID(sluice, (sluice::call_outcome))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_event))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_status))
CAF_ADD_TYPE_ID(sluice, (sluice::time_point))

CAF_END_TYPE_ID_BLOCK(sluice)

// Only ever sent within one process; nodes share state through the backend
// (Redis), not through CAF's network layer.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::tier_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_verdict)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::call_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_status)
