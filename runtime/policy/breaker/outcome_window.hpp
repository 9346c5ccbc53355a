#pragma once

#include <cstdint>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// Counts over the outcomes a breaker window holds.
struct window_totals {
  uint32_t calls = 0;
  uint32_t failures = 0;
  /// Successes slower than the slow-call threshold.
  uint32_t slow = 0;

  /// Share of failures in [0, 1]; 0 for an empty window.
  double failure_rate() const noexcept {
    return calls == 0 ? 0.0 : static_cast<double>(failures) / calls;
  }

  /// Share of slow calls in [0, 1]; 0 for an empty window.
  double slow_rate() const noexcept {
    return calls == 0 ? 0.0 : static_cast<double>(slow) / calls;
  }
};

/// One recorded outcome, already classified by the breaker's policy.
struct window_sample {
  bool failed = false;
  bool slow = false;
};

/// Count-based sliding window: the last `size` outcomes.
class count_window {
public:
  /// `size` must be at least 1.
  explicit count_window(uint32_t size);

  void record(window_sample s) noexcept;

  const window_totals& totals() const noexcept { return totals_; }

  void clear() noexcept;

private:
  std::vector<window_sample> ring_;
  uint32_t next_ = 0;
  window_totals totals_;
};

/// Time-based sliding window: outcomes of the last `span`, in `buckets`
/// buckets of `span / buckets` each. A bucket ages out as a whole, so the
/// window covers between `span - span / buckets` and `span` of history.
///
/// NOTE: like resilience4j's time window, this trades exactness at the
/// window's far edge for O(buckets) memory; more buckets, finer edge.
class time_window {
public:
  /// `span` must be positive and `buckets` at least 1 (and at most the number
  /// of nanoseconds in `span`).
  time_window(duration span, uint32_t buckets);

  void record(time_point now, window_sample s) noexcept;

  /// Totals of the buckets that have not aged out at `now`.
  window_totals totals(time_point now) const noexcept;

  void clear() noexcept;

private:
  struct bucket {
    int64_t epoch = -1; // which bucket-width slice of time this holds
    window_totals totals;
  };

  int64_t epoch_of(time_point now) const noexcept {
    return now.time_since_epoch().count() / width_.count();
  }

  duration width_;
  std::vector<bucket> ring_;
};

} // namespace sluice::policy
