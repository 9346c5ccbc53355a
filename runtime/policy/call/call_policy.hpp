#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "sluice/runtime/policy/call/backoff.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// Most attempts a call may make: a retry budget beyond this is a typo, and
/// each attempt is kept in the call's result.
constexpr uint32_t max_attempts_limit = 1000;

/// Longest `max_retry_after` a kind may allow: a day. A client waits on its
/// call while the governor sleeps out a hint; longer than a day is no
/// longer "retry later" but "down".
constexpr duration max_retry_after_limit = std::chrono::hours{24};

/// How the governor treats one kind of call (chat, embeddings, OCR, ...):
/// its two budgets and its pacing (SPEC §3).
struct call_policy {
  /// Retry budget: real attempts that failed (transient, timeout; and 429 when
  /// `rate_limit_spends_retry`) before `retry_exhausted`.
  uint32_t max_attempts = 3;
  /// Stall budget: unproductive waiting before the stall verdict.
  duration stall_window = std::chrono::seconds{300};
  backoff_config backoff;
  /// No-runnable-source poll interval p (each wait is in [0.5p, 1.0p]).
  duration poll_interval = std::chrono::seconds{1};
  /// Whether a 429 spends the retry budget. Chat in the seed: no (429 is
  /// load, governed by the stall budget); embeddings and OCR: yes.
  bool rate_limit_spends_retry = false;
  /// Longest single attempt; its time is productive.
  duration attempt_timeout = std::chrono::seconds{300};
  /// Longest wait for the first byte of a streamed answer (optional).
  std::optional<duration> ttft_timeout;
  /// Longest upstream Retry-After the call sleeps out (SPEC §7). A longer
  /// hint -- or one longer than the stall budget the call has left -- ends
  /// the call at once (`retry_after_too_long`) with the hint passed on,
  /// instead of sleeping on its admission permits.
  duration max_retry_after = std::chrono::seconds{60};
  /// Hedging (Polly's hedging, Envoy's `hedge_policy`): an attempt with no
  /// first byte (no answer; for a stream, no chunk) after this long gets
  /// another attempt beside it on another runnable source; the first
  /// complete answer wins and the others are cancelled. Unset: no hedging.
  std::optional<duration> hedge_after;
  /// Hedged attempts per call, at most (with `hedge_after`).
  uint32_t max_hedged = 1;
};

/// Most hedged attempts a call may start: each holds a source permit and
/// an upstream request beside the call's own attempt.
constexpr uint32_t max_hedged_limit = 10;

/// Throws `std::invalid_argument` naming the field of the first nonsense
/// setting. Keeps the seed's conservative check `stall_window >=
/// ttft_timeout` (redundant now that TTFT is productive time, but harmless).
void validate(const call_policy& cfg);

/// Whether an attempt that ended in `k` is charged to the retry budget
/// (SPEC §3's table): its time is productive, and a failure counts toward
/// `max_attempts`. Every outcome is, except a 429 of a kind whose 429s are
/// load (`rate_limit_spends_retry` false): its time is refunded to the
/// stall account and `fails` stays. The one place that decides it.
constexpr bool spends_retry(const call_policy& cfg, outcome_kind k) noexcept {
  return k != outcome_kind::rate_limited || cfg.rate_limit_spends_retry;
}

/// Whether the upstream's Retry-After `hint` is too long to sleep out for a
/// call of policy `cfg` that has been stalled for `stalled` (SPEC §7):
/// longer than the stall budget it has left (`stall_window - stalled`, at
/// least zero) or than `max_retry_after`. A hint equal to either bound is
/// still honoured.
bool retry_after_too_long(const call_policy& cfg, duration hint,
                          duration stalled) noexcept;

/// The wait a call that ends on an upstream's Retry-After `hint` (or on a
/// backoff it raised) tells its client: never more than the node itself
/// would sleep out (`max_retry_after`). A one-year hint from a broken or
/// hostile upstream must not park every client for a year.
duration client_retry_after(const call_policy& cfg, duration hint) noexcept;

} // namespace sluice::policy
