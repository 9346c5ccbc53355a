#pragma once

// How many connections an upstream keep-alive pool holds (issue 31, item 5:
// "the pool should keep what is in use").

#include <algorithm>
#include <chrono>
#include <cstddef>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// How long the pool remembers its busiest moment: connections that served
/// calls in flight at once within the last minute (or two) are kept for the
/// next burst; after a quiet minute the pool shrinks to what the calls
/// since needed, as connections finish.
constexpr duration pool_peak_window = std::chrono::seconds{60};

/// The connections a pool keeps, those in use and idle together: the most
/// calls it had in flight at once recently (the last `pool_peak_window`, at
/// most two), capped by `max_idle` (the source's `max_idle_connections`).
/// A connection that just finished goes back to the pool while the
/// connections still in use plus the idle ones are under that, so a steady
/// load of n calls at once reuses n connections and opens none, and a burst
/// that has passed does not leave its connections idle for good.
///
/// NOTE: the peak is kept in two fixed buckets of `pool_peak_window`, not a
/// sliding window: a peak is remembered for between one and two windows.
///
/// Pure (time is an argument); one per pool, on its loop.
class pool_target {
public:
  explicit pool_target(size_t max_idle, duration window = pool_peak_window)
      : max_idle_(max_idle)
      , window_(window) {
    // nop
  }

  /// `in_flight` calls are running at `now` (one just started).
  void record(size_t in_flight, time_point now) noexcept {
    roll(now);
    current_ = std::max(current_, in_flight);
  }

  /// The connections to keep at `now`, in use and idle together.
  size_t keep(time_point now) noexcept {
    roll(now);
    return std::min(max_idle_, std::max(current_, previous_));
  }

  /// Whether a connection that just finished goes back to the pool, with
  /// `in_use` others still serving calls and `idle` already pooled.
  bool keeps_another(size_t in_use, size_t idle, time_point now) noexcept {
    return in_use + idle < keep(now);
  }

private:
  void roll(time_point now) noexcept {
    if (!started_) {
      started_ = true;
      bucket_start_ = now;
      return;
    }
    if (now - bucket_start_ < window_)
      return;
    previous_ = now - bucket_start_ < 2 * window_ ? current_ : 0;
    current_ = 0;
    bucket_start_ = now;
  }

  size_t max_idle_;
  duration window_;
  bool started_ = false;
  time_point bucket_start_{};
  size_t current_ = 0;
  size_t previous_ = 0;
};

} // namespace sluice::policy
