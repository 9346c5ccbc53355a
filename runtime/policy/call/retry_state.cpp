#include "sluice/runtime/policy/call/retry_state.hpp"

#include <algorithm>

#include "sluice/runtime/policy/call/stall_clock.hpp"

namespace sluice::policy {

next_step retry_state::after_outcome(const call_policy& pol, size_t source,
                                     outcome_kind kind,
                                     std::optional<duration> retry_after,
                                     bool others_out, duration stalled,
                                     small_rng& rng, bool retry_safe) {
  using action = next_step::action;
  if (committed_)
    return {action::finish_streamed, kind == outcome_kind::ok};
  switch (kind) {
  case outcome_kind::ok:
    // The first complete answer wins; hedged attempts still out lose.
    return {action::finish, true};
  case outcome_kind::permanent:
    // Fail fast: the request itself is wrong; no retry, no stall check.
    return {action::finish, false};
  case outcome_kind::transient:
  case outcome_kind::timeout:
    if (!retry_safe) // it may have had effects: never sent again
      return {action::finish, false};
    break;
  case outcome_kind::rate_limited:
    break;
  }
  if (spends_retry(pol, kind))
    ++fails_;
  last_failed_ = source;
  bool rate_limited = kind == outcome_kind::rate_limited;
  if (others_out) {
    if (retry_after && (!group_hint_ || *retry_after > *group_hint_))
      group_hint_ = retry_after;
    group_rate_limited_ = group_rate_limited_ || rate_limited;
    return {action::wait_for_group};
  }
  // The last of the group: the longest hint and any 429 among it count.
  if (group_hint_ && (!retry_after || *group_hint_ > *retry_after))
    retry_after = group_hint_;
  rate_limited = rate_limited || group_rate_limited_;
  group_hint_.reset();
  group_rate_limited_ = false;
  auto delay = backoff_delay(pol.backoff, fails_, rng.uniform(), retry_after);
  next_step step;
  if (fails_ >= pol.max_attempts) {
    step.what = action::exhausted;
    step.reason = "retry_exhausted";
    step.retry_in = delay;
    return step;
  }
  // SPEC §7: a hint longer than the stall budget left (or than the kind's
  // max_retry_after) is not slept out on the call's admission permits: the
  // call ends now and passes the hint on, so the client waits, not us.
  if (retry_after && retry_after_too_long(pol, *retry_after, stalled)) {
    step.what = action::exhausted;
    step.reason = "retry_after_too_long";
    step.retry_in = *retry_after;
    return step;
  }
  step.what = action::back_off;
  step.delay = delay;
  step.stall_check_first = rate_limited;
  return step;
}

bool retry_state::ends_when_budget_spent(when_budget_spent when,
                                         duration stalled,
                                         duration window) noexcept {
  return when == when_budget_spent::fail ||
         local_stall_exceeded(stalled, window);
}

duration progress_interval(const call_policy& pol) noexcept {
  return std::min<duration>(pol.stall_window / 100,
                            std::chrono::milliseconds{100});
}

} // namespace sluice::policy
