#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "sluice/messages/admission.hpp"
#include "sluice/runtime/policy/call/governor_phase.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/spend/provider_limits.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// One call as the caller made it. The payload is opaque to the runtime;
/// sources interpret it (an OpenAI request body, a tool call, ...).
struct call_request {
  /// The route it was made on (selects sources and the call policy).
  std::string route;
  std::string payload;
  /// The model the caller asked for (OpenAI's `model`; empty: none). Picks
  /// the route's sources (see route_config::models); a source with its own
  /// name for it gets the payload with that name.
  std::string model{};
  /// The caller wants the answer streamed as it arrives (an OpenAI
  /// `"stream": true` request): the governor sends `(stream_chunk_atom,
  /// std::string)` to its caller for each piece, before the `call_result`.
  bool stream = false;
  /// Set by the governor on each attempt of a streamed call: a source that
  /// can stream sends `(stream_chunk_atom, stream_tag, std::string bytes)` to
  /// `stream_to` as bytes arrive, then replies (with an empty body). Sources
  /// that cannot stream ignore both and reply with the whole body.
  caf::actor stream_to{};
  uint64_t stream_tag = 0;
  /// Set by the governor on each attempt at a self-timed source (the
  /// built-in ones, see messages/source.hpp): the source answers `timeout`
  /// once this much time has passed without its answer. Zero: no limit.
  /// Other sources never see it: the runtime times them from outside.
  duration timeout{};
  /// Request headers to send upstream as given (the node sets X-Request-Id,
  /// traceparent, tracestate); sources that are not HTTP ignore them. At
  /// most 8 (`max_call_headers`), names and values already validated by
  /// the caller.
  std::vector<std::pair<std::string, std::string>> headers{};
  /// What the call reserves in tokens (its prompt estimate and its
  /// `max_tokens`; SPEC §12), for a source whose upstream says what it
  /// has left (0: not known; the governor estimates it from the payload
  /// when it needs it).
  uint64_t tokens = 0;
};

/// The wire form of a call request (a source in another process, see
/// runtime/remote_source.hpp): every field crosses. (The node's connector
/// puts itself in `stream_to`, with a random tag: a governor's handle never
/// crosses.)
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, call_request& x) {
  return f(caf::meta::type_name("sluice.call_request"), x.route, x.payload,
           x.model, x.stream, x.stream_to, x.stream_tag, x.timeout, x.headers,
           x.tokens);
}

/// Most entries of `call_request::headers`; an HTTP source sends no more.
constexpr size_t max_call_headers = 8;

/// A source's answer to one attempt.
struct source_reply {
  policy::outcome_kind kind = policy::outcome_kind::ok;
  /// Upstream status code, if there is one (HTTP status), else 0.
  int status = 0;
  /// The answer (ok) or the upstream's error body (permanent).
  std::string body;
  /// Retry-After given by the upstream (429 or 503).
  std::optional<duration> retry_after;
  /// The media type of `body` if the upstream named one (HTTP
  /// Content-Type); empty: JSON.
  std::string content_type{};
  /// A failure's cause in a few words, for the caller's attempt record and
  /// the log: `connect: Connection refused`, `tls: unable to get local
  /// issuer certificate`, `timeout: first byte`. Never a secret, never the
  /// upstream's body. Empty: the status says it (or nothing is known).
  std::string reason{};
  /// What the upstream said of its own rate limits in the answer's headers
  /// (empty: nothing; SPEC §12).
  policy::provider_limits limits{};
  /// A failure (transient, timeout) that must not be retried: the request
  /// reached the upstream and may have had effects there (a tool call that
  /// is neither read-only nor idempotent, SPEC §13;
  /// runtime/policy/mcp/retry_safety.hpp). The breaker still counts it;
  /// the governor ends the call with this answer.
  bool unsafe_to_retry = false;
};

} // namespace sluice

namespace sluice::policy {

/// The wire form of one provider limit (a flag per field: CAF 0.17 has no
/// inspector for `std::optional`).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, limit_lane& x) {
  uint8_t has = (x.limit ? 1 : 0) | (x.remaining ? 2 : 0) | (x.reset ? 4 : 0);
  auto limit = x.limit.value_or(0);
  auto remaining = x.remaining.value_or(0);
  auto reset = x.reset.value_or(duration::zero());
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x.limit = (has & 1) != 0 ? std::optional<uint64_t>{limit} : std::nullopt;
    x.remaining =
        (has & 2) != 0 ? std::optional<uint64_t>{remaining} : std::nullopt;
    x.reset = (has & 4) != 0 ? std::optional<duration>{reset} : std::nullopt;
    return caf::none;
  });
  return f(caf::meta::type_name("sluice.limit_lane"), has, limit, remaining,
           reset, load);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, provider_limits& x) {
  return f(caf::meta::type_name("sluice.provider_limits"), x.requests, x.tokens,
           x.input_tokens, x.output_tokens);
}

} // namespace sluice::policy

namespace sluice {

/// The wire form of a source's answer (CAF 0.17 has no inspector for
/// `std::optional`: a flag and a value stand for `retry_after`).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, source_reply& x) {
  bool has_retry = x.retry_after.has_value();
  auto retry = x.retry_after.value_or(duration::zero());
  auto load = caf::meta::load_callback([&]() -> caf::error {
    if (has_retry)
      x.retry_after = retry;
    else
      x.retry_after.reset();
    return caf::none;
  });
  return f(caf::meta::type_name("sluice.source_reply"), x.kind, x.status,
           x.body, has_retry, retry, x.content_type, x.reason, x.limits,
           x.unsafe_to_retry, load);
}

/// One attempt of a call, for the caller's record.
struct attempt_record {
  std::string source;
  policy::outcome_kind kind;
  int status;
  duration elapsed;
  /// Started beside a slow attempt (hedging), not after a failed one.
  bool hedge = false;
  /// Its answer is the call's (a success, a permanent error passed on, or
  /// the stream the caller got).
  bool won = false;
  /// Stopped without an answer: another attempt won (`kind` means nothing).
  bool cancelled = false;
  /// Why it failed (`source_reply::reason`, or the governor's own timeout),
  /// cut to `max_attempt_reason_bytes`; empty when the status says it.
  std::string reason{};
};

/// The longest `attempt_record::reason` kept: a source's reason is cut
/// here, so a source cannot grow every error answer.
constexpr size_t max_attempt_reason_bytes = 200;

/// How a governed call ended.
enum class call_status : uint8_t {
  ok,
  /// Admission deadline passed (`busy_tier` names the tier).
  tool_busy,
  /// No source could complete it (`reason`: stalled | retry_exhausted).
  all_sources_exhausted,
  /// A permanent upstream error, passed through (`upstream_status`, `body`).
  upstream_error,
  /// The scope-state backend failed; nothing was let through (fail-closed).
  governance_backend_error,
  /// The caller cancelled the call (the governor was terminated). Never sent
  /// by a governor; reported by the runtime facade to callbacks and futures.
  cancelled,
};

std::string_view to_string(call_status x) noexcept;

/// The governor's single reply to a call.
struct call_result {
  call_status status = call_status::ok;
  /// The source that answered (ok, upstream_error).
  std::string source;
  /// The answer (ok) or the upstream's error body (upstream_error).
  std::string body;
  int upstream_status = 0;
  /// The media type of `body` (ok, upstream_error) as the source gave it;
  /// empty: JSON.
  std::string content_type;
  /// For all_sources_exhausted: "stalled" or "retry_exhausted"; for an
  /// upstream_error of a streamed call: "stream_interrupted".
  std::string reason;
  /// When it is worth trying again (all_sources_exhausted, tool_busy).
  double retry_after_s = 0;
  std::optional<tier_kind> busy_tier;
  /// Every attempt made, in order.
  std::vector<attempt_record> attempts;
  /// The answer went to the caller as stream chunks (`body` is empty). Once
  /// a chunk went out, there is no retry or failover: a failure after it
  /// ends the call as `upstream_error` with reason "stream_interrupted".
  bool streamed = false;
  /// The stall clock's accounts when the call ended: unproductive waiting
  /// it charged (SPEC's stall budget), and time in productive attempts.
  duration stalled{};
  duration productive{};

  bool ok() const noexcept { return status == call_status::ok; }

  /// The call's time at upstreams: its attempts' time summed, or, when
  /// attempts overlapped (hedging), the stall clock's union of them
  /// (`productive`; a 429's time, refunded there, is then left out).
  duration upstream_time() const noexcept {
    duration sum{};
    bool overlapped = false;
    for (auto& a : attempts) {
      sum += a.elapsed;
      overlapped = overlapped || a.hedge;
    }
    return overlapped ? productive : sum;
  }
};

/// A governor's accounts, for status pages and tests.
struct governor_status {
  duration stalled;
  duration productive;
  uint32_t fails;
  uint32_t attempts;
  policy::governor_phase phase = policy::governor_phase::idle;
};

/// What the scope-state backend knows of a scope's progress: the time since
/// any call in it last succeeded, or nothing if none ever did (+infinity).
struct progress_age {
  std::optional<duration> age;
};

} // namespace sluice
