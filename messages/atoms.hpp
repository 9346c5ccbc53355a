#pragma once

// The protocol between Sluice actors: atoms and type IDs. Written with CAF's
// type-ID block macros, which 0.17.6 accepts and 0.18+ requires.

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "sluice/messages/admission.hpp"
#include "sluice/messages/breaker.hpp"
#include "sluice/messages/call.hpp"
#include "sluice/runtime/policy/time.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(sluice, caf::first_custom_type_id)

// -- admission ----------------------------------------------------------------

/// `(acquire_atom, time_point deadline) -> permit_id`: ask a tier owner for
/// a permit for the sender, waiting FIFO until `deadline` at the latest.
/// Fails with `tool_busy` naming the tier.
CAF_ADD_ATOM(sluice, sluice, acquire_atom, "acquire")

/// `(wake_atom)`: a permit came back while waiters were queued.
CAF_ADD_ATOM(sluice, sluice, wake_atom, "wake")

/// `(expire_atom, uint64_t waiter)`: the deadline timer of one waiter.
/// Stale timers (the waiter already left) are ignored.
CAF_ADD_ATOM(sluice, sluice, expire_atom, "expire")

/// `(lease_release_atom, std::string lease)`: give a cluster lease back.
CAF_ADD_ATOM(sluice, sluice, lease_release_atom, "lrelease")
/// `(lease_renew_atom)`: the cluster tier's renewal timer.
CAF_ADD_ATOM(sluice, sluice, lease_renew_atom, "lrenew")
/// `(lease_poll_atom, uint64_t seq)`: the cluster tier's retry timer while
/// callers wait (a replaced one, by number, is ignored).
CAF_ADD_ATOM(sluice, sluice, lease_poll_atom, "lpoll")
/// `(status_atom) -> tier_status`: current counts of a tier.
CAF_ADD_ATOM(sluice, sluice, status_atom, "status")

// -- breakers -----------------------------------------------------------------

/// `(allow_atom) -> breaker_verdict`: may the sender's call go now? A probe
/// lease in the verdict is held by the sender (monitored).
CAF_ADD_ATOM(sluice, sluice, allow_atom, "allow")

/// `(record_atom, call_outcome)`: the outcome of a call the breaker let go.
CAF_ADD_ATOM(sluice, sluice, record_atom, "record")

/// `(subscribe_atom) -> breaker_status`: send every transition to the sender
/// from now on (monitored; dropped when it dies). Replies with the state the
/// subscription starts from.
CAF_ADD_ATOM(sluice, sluice, subscribe_atom, "bsubscribe")


/// `(isolate_atom) -> breaker_status`: operator action, open and stay open
/// until reset.
CAF_ADD_ATOM(sluice, sluice, isolate_atom, "bisolate")

/// `(reset_atom) -> breaker_status`: operator action, close now with a
/// cleared window.
CAF_ADD_ATOM(sluice, sluice, reset_atom, "breset")

/// `(peer_state_atom, breaker_state to, duration open_for)`: another node's
/// breaker for this source opened (for `open_for`) or closed; apply it.
CAF_ADD_ATOM(sluice, sluice, peer_state_atom, "peerstate")

/// `(peer_heard_atom, std::string payload)`: a message as heard on the
/// shared channel, from the relay's listener to the node's breaker relay
/// (which passes a newer transition on as `peer_state_atom`).
CAF_ADD_ATOM(sluice, sluice, peer_heard_atom, "peerheard")

/// `(relay_sync_atom)`: the relay's listener (re)subscribed: read the
/// shared state and catch up.
CAF_ADD_ATOM(sluice, sluice, relay_sync_atom, "rsync")

/// `(probe_gate_atom, caf::actor relay)`: to a breaker shared with other
/// nodes: claim the cluster's probe lease through `relay` before each
/// half-open.
CAF_ADD_ATOM(sluice, sluice, probe_gate_atom, "pgate")

/// `(probe_claim_atom, std::string source, duration ttl) -> duration`: to
/// the breaker relay (see `probe_claim_unanswered`).
CAF_ADD_ATOM(sluice, sluice, probe_claim_atom, "pclaim")

/// `(relay_watch_atom, std::string source, caf::actor breaker)`: to the
/// breaker relay: publish this breaker's transitions to the other nodes and
/// apply theirs to it.
CAF_ADD_ATOM(sluice, sluice, relay_watch_atom, "rwatch")
/// `(half_open_atom, uint64_t generation)`: the open period's timer.
CAF_ADD_ATOM(sluice, sluice, half_open_atom, "halfopen")

/// `(lease_expire_atom, lease_id)`: a probe lease's timer.
CAF_ADD_ATOM(sluice, sluice, lease_expire_atom, "leaseexp")

/// `(retire_atom)`: a reload took the breaker's source out (see
/// `retire_breaker`).
CAF_ADD_ATOM(sluice, sluice, retire_atom, "bretire")

// -- calls, sources, governors ------------------------------------------------

/// `(call_atom) -> call_result`: start the call a governor was spawned for.
CAF_ADD_ATOM(sluice, sluice, call_atom, "call")

/// `(attempt_atom, call_request) -> source_reply`: one attempt at a source.
CAF_ADD_ATOM(sluice, sluice, attempt_atom, "attempt")

/// `(cancel_atom)`: from a governor to a self-timed (built-in) source:
/// abandon every attempt the sender has in flight there, unanswered.
CAF_ADD_ATOM(sluice, sluice, cancel_atom, "cancel")
/// `(remote_attempt_atom, uint64_t tag, call_request)`: from a node to a
/// source served in another process (runtime/remote_source.hpp); answered
/// by `(remote_reply_atom, uint64_t tag, source_reply)`, withdrawn by
/// `(cancel_atom, uint64_t tag)`.
CAF_ADD_ATOM(sluice, sluice, remote_attempt_atom, "rattempt")
CAF_ADD_ATOM(sluice, sluice, remote_reply_atom, "rreply")
/// `(run_atom) -> source_reply`: an attempt runner's single job.
CAF_ADD_ATOM(sluice, sluice, run_atom, "run")

/// `(resume_atom, uint64_t seq)`: a governor's backoff or poll timer.
CAF_ADD_ATOM(sluice, sluice, resume_atom, "resume")

/// `(aimd_atom, outcome_kind, uint32_t in_flight)`: an attempt's outcome,
/// for the source tier's AIMD limit.
CAF_ADD_ATOM(sluice, sluice, aimd_atom, "aimd")

/// `(watch_atom)`: tell the sender when a source permit frees (monitored).
CAF_ADD_ATOM(sluice, sluice, watch_atom, "watch")

/// `(freed_atom, std::string source)`: a source permit came back.
CAF_ADD_ATOM(sluice, sluice, freed_atom, "freed")

/// `(progress_atom, std::string scope)`: a call in the scope succeeded.
/// `(progress_age_atom, std::string scope) -> progress_age`.
CAF_ADD_ATOM(sluice, sluice, progress_atom, "progress")
CAF_ADD_ATOM(sluice, sluice, progress_age_atom, "progage")

/// Streamed answers. `(stream_chunk_atom, uint64_t tag, std::string)`: bytes
/// of an attempt, from a source to its governor; `(stream_chunk_atom,
/// std::string)`: bytes of the answer, from a governor to its caller.
CAF_ADD_ATOM(sluice, sluice, stream_chunk_atom, "chunk")

/// `(first_byte_atom, uint64_t tag)`: a streamed attempt's time-to-first-byte
/// timer (a request a governor sends itself and lets time out).
CAF_ADD_ATOM(sluice, sluice, first_byte_atom, "ttft")

/// `(hedge_timer_atom, uint64_t seq)`: a governor's hedge timer of attempt
/// `seq` (a request to itself, never answered, that times out).
CAF_ADD_ATOM(sluice, sluice, hedge_timer_atom, "hedgetmr")

/// `(direct_done_atom, uint64_t seq, source_reply)`: the answer to an
/// attempt a governor started directly on its loop (actors/direct_attempts),
/// from the source's client to the governor.
CAF_ADD_ATOM(sluice, sluice, direct_done_atom, "dirdone")

// -- private to one actor (its own timers and loop-backs) ---------------------

/// `(http_done_atom, uint64_t id, source_reply)`: an HTTP source's attempt
/// answered by its client, back on the source actor.
CAF_ADD_ATOM(sluice, sluice, http_done_atom, "httpdone")
/// `(sim_reply_atom, uint64_t id)`, `(sim_chunk_atom, uint64_t id, int k)`:
/// the simulated source's latency timer and its stream's chunk timers.
CAF_ADD_ATOM(sluice, sluice, sim_reply_atom, "simreply")
CAF_ADD_ATOM(sluice, sluice, sim_chunk_atom, "simchunk")
/// `(link_up_atom)`, `(link_down_atom, std::string why)`: a remote source's
/// link came up or went down (runtime/remote_source).
CAF_ADD_ATOM(sluice, sluice, link_up_atom, "rlinkup")
CAF_ADD_ATOM(sluice, sluice, link_down_atom, "rlinkdown")
/// `(retry_publish_atom)`, `(confirm_gen_atom, std::string source)`: the
/// breaker relay's publish retry timer and its read of a source's shared
/// generation (runtime/redis/breaker_relay).
CAF_ADD_ATOM(sluice, sluice, retry_publish_atom, "rpublish")
CAF_ADD_ATOM(sluice, sluice, confirm_gen_atom, "rconfirm")

CAF_ADD_TYPE_ID(sluice, (sluice::tier_status))
CAF_ADD_TYPE_ID(sluice, (sluice::gate_status))
CAF_ADD_TYPE_ID(sluice, (sluice::call_request))
CAF_ADD_TYPE_ID(sluice, (sluice::source_reply))
CAF_ADD_TYPE_ID(sluice, (sluice::call_result))
CAF_ADD_TYPE_ID(sluice, (sluice::governor_status))
CAF_ADD_TYPE_ID(sluice, (sluice::progress_age))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_verdict))
CAF_ADD_TYPE_ID(sluice, (sluice::call_outcome))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_event))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_status))
CAF_ADD_TYPE_ID(sluice, (sluice::breaker_settings))
CAF_ADD_TYPE_ID(sluice, (sluice::time_point))

CAF_END_TYPE_ID_BLOCK(sluice)

// Only ever sent within one process; nodes share state through the backend
// (Redis). What crosses CAF's network layer (a source in another process,
// runtime/remote_source.hpp) has `inspect()`: `call_request`,
// `source_reply`, and atoms, integers and strings.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::tier_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::gate_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_verdict)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::call_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::breaker_settings)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::call_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::governor_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::progress_age)
