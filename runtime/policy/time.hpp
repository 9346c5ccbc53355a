#pragma once

#include <chrono>

namespace sluice {

// -- time types shared by every layer -----------------------------------------

/// The clock behind every deadline. CAF's actor clock is a steady clock, and
/// its testing scheduler virtualises exactly this type, so policy classes and
/// actors agree on what a time point is without policy code including CAF.
using steady = std::chrono::steady_clock;

/// A point in time on the steady clock (real or virtual).
using time_point = steady::time_point;

/// A span of time at the steady clock's resolution (nanoseconds).
using duration = steady::duration;

/// Returns whether `deadline` has passed at `now`. Inclusive on purpose: a
/// waiter whose deadline is exactly now gets no permit, so the longest wait is
/// `wait_timeout` and never a hair more.
constexpr bool deadline_passed(time_point deadline, time_point now) noexcept {
  return now >= deadline;
}

} // namespace sluice
