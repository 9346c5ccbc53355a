#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// One call's stall account (SPEC §3, seed 000 §3): only unproductive waiting
/// counts. `stalled = (now - entered_at) - productive`, where productive time
/// is the time spent in real attempts that spend the retry budget. An attempt
/// that ends in 429 (for kinds where 429 does not spend the retry budget) is
/// refunded: its time goes back to the stall account, or it would fall
/// between the two budgets (seed §3.6: 301 attempts, 25 hours).
///
/// Attempts may overlap (a hedged attempt runs beside a slow one): the
/// productive time is the *union* of their intervals, so overlapping
/// attempts count once, never twice. A refunded attempt adds nothing, but
/// time another attempt covered stays productive.
///
/// One instance per call, owned by that call's governor and never shared:
/// concurrent calls would corrupt each other's accounts. Arithmetic only, so
/// a cancelled call simply stops using it.
class stall_clock {
public:
  using attempt_id = uint32_t;

  explicit stall_clock(time_point entered_at)
      : entered_at_(entered_at) {
    // nop
  }

  /// Unproductive time so far. Attempts in progress count as productive
  /// (one may yet be refunded if it ends in a 429).
  duration stalled(time_point now) const noexcept;

  /// Productive time of finished attempts (their union).
  duration productive() const noexcept { return productive_; }

  /// Whether an attempt is in progress.
  bool attempting() const noexcept { return first_open_.first != 0; }

  /// Marks the start of a real attempt; returns its id for `end_attempt`.
  attempt_id begin_attempt(time_point now);

  /// Ends attempt `id` (nothing for an unknown one): its interval joins the
  /// productive union, unless `refund` (a 429 that did not spend the retry
  /// budget).
  void end_attempt(attempt_id id, time_point now, bool refund);

private:
  using open_attempt = std::pair<attempt_id, time_point>;

  /// How much of [from, to] the finished productive intervals cover.
  duration covered(time_point from, time_point to) const noexcept;

  /// When the earliest attempt in progress began (one must be).
  time_point earliest_open() const noexcept;

  time_point entered_at_;
  duration productive_{};
  /// Finished productive intervals an open attempt may still overlap:
  /// sorted, disjoint (empty unless attempts overlap).
  std::vector<std::pair<time_point, time_point>> done_;
  /// Attempts in progress and when each began: the first in place (id 0:
  /// none), the others -- only while hedging -- in `more_open_`, so a call
  /// allocates nothing per attempt. `more_open_` is empty unless
  /// `first_open_` is set.
  open_attempt first_open_{};
  std::vector<open_attempt> more_open_;
  attempt_id next_id_ = 1;
};

/// The first half of the stall verdict: the call's own unproductive time
/// exceeds the window. Only then is the scope's progress worth asking for
/// (a message to the backend); without it the verdict is "not stalled",
/// whatever the scope's age.
constexpr bool local_stall_exceeded(duration local_stalled,
                                    duration window) noexcept {
  return local_stalled > window;
}

/// The stall verdict: both the call's own unproductive time and the scope's
/// time since any call last made progress exceed the window. A scope that
/// never progressed (`progress_age` empty, +infinity) counts as exceeded --
/// the correct conservative default (seed §3.4): nothing shows it is alive.
inline bool stall_verdict(duration local_stalled,
                          std::optional<duration> progress_age,
                          duration window) noexcept {
  return local_stall_exceeded(local_stalled, window) &&
         (!progress_age || *progress_age > window);
}

} // namespace sluice::policy
