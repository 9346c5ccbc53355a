#pragma once

// The interface of a source: what users implement to plug their own
// upstream into Sluice.

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/call.hpp"

namespace sluice {

/// A source: `(attempt_atom, call_request) -> source_reply`, one reply per
/// attempt, with the outcome class (`ok`, `rate_limited` + optional
/// Retry-After, `transient`, `timeout`, `permanent`).
///
/// Contract:
/// - The runtime sends each attempt from a short-lived actor of its own and
///   enforces the attempt's deadline around it; the source need not.
/// - **Cancellation is termination**: when a call is cancelled or its attempt
///   times out, the requesting actor terminates. A source that holds
///   resources per attempt (a connection, a stream) should `monitor` the
///   requester (`self->current_sender()`) and abandon the attempt on its
///   `down_msg`. The built-in sources do.
/// - The built-in sources (simulated, HTTP) are *self-timed*: the governor
///   asks them directly, without a runner actor per attempt, and they keep
///   the bargain that makes this safe -- they answer `timeout` when
///   `call_request::timeout` has passed, and abandon the sender's attempts
///   on `(cancel_atom)` as on its termination. That saves an actor, four
///   messages and a clock timer per attempt (bench/RESULTS.md).
/// - Replying after the requester is gone is harmless (the reply is dropped).
/// - **Streaming** (optional): when `call_request::stream_to` is set, a source
///   that can stream sends `(stream_chunk_atom, request.stream_tag,
///   std::string bytes)` to it as the answer arrives, then replies with an
///   empty body. Send chunks only for an answer that succeeds so far (a 2xx):
///   the first chunk commits the call to this attempt -- no retry or failover
///   after it. A source that cannot stream just replies with the whole body.
using source_actor = caf::typed_actor<
    caf::replies_to<attempt_atom, call_request>::with<source_reply>>;

} // namespace sluice
