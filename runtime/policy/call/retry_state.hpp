#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "sluice/runtime/policy/call/call_policy.hpp"
#include "sluice/runtime/policy/call/retry_budget.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/rng.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// What a governor does after one attempt's outcome (SPEC §3, §7).
struct next_step {
  enum class action : uint8_t {
    /// The attempt's answer is the call's: an answer (ok) or a request the
    /// upstream refused for good (permanent, no retry).
    finish,
    /// Bytes of this attempt already went to the caller: its outcome,
    /// whatever it is, ends the call (no retry, no failover).
    finish_streamed,
    /// Hedging: another attempt is still out; its answer decides. This
    /// failure's hint is kept for the backoff after the last one.
    wait_for_group,
    /// Sleep `delay`, then the next round (after a stall check first when
    /// `stall_check_first`: a 429 may not spend the retry budget, so the
    /// stall budget guards against saturation loops).
    back_off,
    /// The call ends with `reason`; its client is told to retry in
    /// `retry_in` (capped by `client_retry_after`).
    exhausted,
  };
  action what = action::finish;
  /// A complete answer: the route's scope progressed (telemetry).
  bool progressed = false;
  duration delay{};
  bool stall_check_first = false;
  const char* reason = "";
  duration retry_in{};
};

/// The retry side of one call, without actors or clocks: failures counted
/// against `max_attempts`, the last failed source (tried last next round),
/// the hedge group's pooled hint and 429 flag, the hedges started, and
/// whether a stream committed the call to one attempt. A governor asks it
/// after every outcome and switches on the `next_step` it returns (as
/// Envoy's router asks `RetryState` and switches on `RetryStatus`).
class retry_state {
public:
  /// The attempt at source `source` ended in `kind`, with the upstream's
  /// `retry_after` hint if any. `others_out`: another attempt of the call
  /// is still running (hedging). `stalled`: the call's stall time now.
  /// `rng` draws the backoff's jitter (only when a backoff is computed).
  /// `retry_safe` false: a failure (transient, timeout) ends the call with
  /// its answer, as a permanent one does (a request that may have had
  /// effects upstream; a 429 is still retried: the upstream refused it).
  next_step after_outcome(const call_policy& pol, size_t source,
                          outcome_kind kind,
                          std::optional<duration> retry_after, bool others_out,
                          duration stalled, small_rng& rng,
                          bool retry_safe = true);

  /// The first bytes of a stream went to the caller: from now on the
  /// attempt they came from is the answer.
  void commit() noexcept { committed_ = true; }

  bool committed() const noexcept { return committed_; }

  /// The one hedge predicate: whether the call may start (or still start)
  /// a hedged attempt beside the attempt it is for. `attempting`: the
  /// governor is in its attempting phase; `attempt_out`: the attempt the
  /// hedge is for is still running.
  bool may_hedge(const call_policy& pol, bool attempting,
                 bool attempt_out) const noexcept {
    return pol.hedge_after && hedges_ < pol.max_hedged && !committed_ &&
           attempting && attempt_out;
  }

  /// A hedged attempt started.
  void hedge_started() noexcept { ++hedges_; }

  /// Whether a round needs a slot of the route's retry budget before its
  /// attempt goes: a round after an attempt (a retry), not a hedge, when
  /// the route has a budget and the call holds no slot yet.
  static bool needs_retry_slot(bool has_budget, bool attempted, bool hedge,
                               bool holds_slot) noexcept {
    return has_budget && attempted && !hedge && !holds_slot;
  }

  /// The route's retry budget has no retry for the call now: whether the
  /// call ends (`retry_budget`) rather than waiting a poll interval and
  /// asking again. It ends when the budget says so, or when its own stall
  /// time passed its window (the scope progressing -- other calls
  /// succeeding -- must not keep it waiting for ever).
  static bool ends_when_budget_spent(when_budget_spent when, duration stalled,
                                     duration window) noexcept;

  uint32_t fails() const noexcept { return fails_; }

  uint32_t hedges() const noexcept { return hedges_; }

  /// The source of the last failed attempt.
  std::optional<size_t> last_failed() const noexcept { return last_failed_; }

private:
  uint32_t fails_ = 0;
  uint32_t hedges_ = 0;
  std::optional<size_t> last_failed_;
  /// Failures while another attempt was still out: the longest hint among
  /// them, and whether one was a 429.
  std::optional<duration> group_hint_;
  bool group_rate_limited_ = false;
  bool committed_ = false;
};

/// How often a route tells its backend that its scope progressed, at most:
/// a marker read against stall windows of `pol` must be fresh to a
/// hundredth of the window, and never older than 100 ms.
duration progress_interval(const call_policy& pol) noexcept;

} // namespace sluice::policy
