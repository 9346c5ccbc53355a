#pragma once

#include <cstdint>
#include <optional>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// Longest duration any policy setting may name (windows, timeouts, open
/// durations, backoff caps): a week. Longer values are typos or unit
/// mix-ups, and every sum of a time point and a setting stays far from
/// overflowing the nanosecond clock (±292 years).
constexpr duration duration_limit = std::chrono::hours{24 * 7};

/// Exponential backoff between attempts.
struct backoff_config {
  /// Delay after the first failure.
  duration base = std::chrono::seconds{2};
  /// Longest delay.
  duration cap = std::chrono::seconds{60};
  /// Share of the delay that is randomised, in [0, 1]: the delay is drawn
  /// from [d * (1 - jitter), d]. 0 turns jitter off, 1 is "full jitter".
  double jitter = 0.5;
};

/// The delay before the next attempt: `base * 2^(max(fails, 1) - 1)`, capped,
/// jittered with `u` (uniform in [0, 1)), and raised to `retry_after` when
/// that is larger -- never retry before the upstream's hint.
duration backoff_delay(const backoff_config& cfg, uint32_t fails, double u,
                       std::optional<duration> retry_after = std::nullopt);

/// The no-runnable-source poll: a jittered interval in [0.5p, 1.0p] so that
/// waiting calls do not wake in lockstep.
duration poll_delay(duration interval, double u);

} // namespace sluice::policy
