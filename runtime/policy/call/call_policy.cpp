#include "sluice/runtime/policy/call/call_policy.hpp"
#include "sluice/runtime/policy/field_error.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sluice::policy {

namespace {

[[noreturn]] void refuse(const char* field, const std::string& why) {
  throw field_error(field, why);
}

void positive(const char* field, duration d) {
  if (d <= duration::zero())
    refuse(field, "must be positive");
  if (d > duration_limit)
    refuse(field, "must be at most a week (604800 s)");
}

} // namespace

void validate(const call_policy& cfg) {
  if (cfg.max_attempts == 0 || cfg.max_attempts > max_attempts_limit)
    refuse("max_attempts",
           "must be in [1, " + std::to_string(max_attempts_limit) + "]");
  positive("stall_window", cfg.stall_window);
  positive("backoff_base", cfg.backoff.base);
  if (cfg.backoff.cap < cfg.backoff.base)
    refuse("backoff_cap", "must be at least backoff_base");
  positive("backoff_cap", cfg.backoff.cap);
  if (!(cfg.backoff.jitter >= 0.0 && cfg.backoff.jitter <= 1.0))
    refuse("backoff_jitter",
           "must be in [0, 1], got " + std::to_string(cfg.backoff.jitter));
  positive("poll_interval", cfg.poll_interval);
  positive("attempt_timeout", cfg.attempt_timeout);
  if (cfg.max_retry_after <= duration::zero() ||
      cfg.max_retry_after > max_retry_after_limit)
    refuse("max_retry_after", "must be in (0, 86400] seconds");
  if (cfg.hedge_after)
    positive("hedge_after", *cfg.hedge_after);
  if (cfg.max_hedged > max_hedged_limit)
    refuse("max_hedged",
           "must be in [0, " + std::to_string(max_hedged_limit) + "]");
  if (cfg.ttft_timeout) {
    positive("ttft_timeout", *cfg.ttft_timeout);
    if (cfg.stall_window < *cfg.ttft_timeout)
      refuse("stall_window", "must be at least ttft_timeout (a conservative "
                             "check: time to first byte is productive time)");
  }
}

bool retry_after_too_long(const call_policy& cfg, duration hint,
                          duration stalled) noexcept {
  auto left = std::max(duration::zero(), cfg.stall_window - stalled);
  return hint > left || hint > cfg.max_retry_after;
}

duration client_retry_after(const call_policy& cfg, duration hint) noexcept {
  return std::clamp(hint, duration::zero(), cfg.max_retry_after);
}

} // namespace sluice::policy
