#pragma once

#include <cstdint>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// The most buckets a token window keeps (its resolution: a minute's
/// window counts in seconds, a day's in 24-minute steps).
constexpr uint32_t token_window_buckets = 60;

/// A limit in tokens over a sliding period (tokens per minute, per day;
/// SPEC §12) with reservations: a call reserves its estimate before it is
/// sent and settles with what it really used when it ends, whatever the
/// end. A reservation is granted only if what was used in the last period,
/// what is reserved by calls in flight and the new estimate fit the limit,
/// so the limit is passed only by what calls in flight use beyond their
/// estimates. Pure: takes `now`; not thread-safe (one owner).
///
/// Used tokens are counted in buckets of period / `token_window_buckets`
/// each (the first settle after a bucket's width began a new one); a
/// bucket leaves the window a whole period after it ends, so a token
/// counts for at least one period and at most one period and one bucket's
/// width: the window never lets more in than the limit allows.
class token_window {
public:
  /// What a reservation got.
  struct grant {
    /// Granted (and now counted in flight).
    bool ok = false;
    /// Refused because the estimate alone is larger than the limit: no
    /// wait makes it fit.
    bool too_large = false;
    /// What is left of the limit now, after this reservation if granted.
    uint64_t remaining = 0;
    /// If refused (and not too large): how long until the used tokens that
    /// have to leave the window have left it. Zero when only reservations
    /// in flight stand in the way (their calls' ends free them).
    duration retry_after = duration::zero();
  };

  /// `limit` > 0 tokens per `period` > 0.
  token_window(uint64_t limit, duration period);

  /// A new limit (a config reload): what was used and reserved stays
  /// counted against it. `limit` > 0.
  void set_limit(uint64_t limit);

  /// Reserves `n` tokens at `now`.
  grant reserve(uint64_t n, time_point now);

  /// A call that reserved `reserved` ends having used `used` (0 for a call
  /// that never reached the upstream): its reservation is freed and what
  /// it used counted at `now`.
  void settle(uint64_t reserved, uint64_t used, time_point now);

  /// Used tokens still in the window at `now`, and reserved in flight.
  uint64_t used(time_point now) const noexcept;
  uint64_t in_flight() const noexcept { return in_flight_; }
  uint64_t limit() const noexcept { return limit_; }
  /// What is left at `now` (0 when used and reserved reach the limit).
  uint64_t remaining(time_point now) const noexcept;
  /// How long until every used token now in the window has left it (OpenAI's
  /// `x-ratelimit-reset-tokens`): zero when none is.
  duration reset_after(time_point now) const noexcept;

private:
  struct bucket {
    time_point start{};
    uint64_t tokens = 0;
  };

  void expire(time_point now) const noexcept;
  static uint64_t add(uint64_t a, uint64_t b) noexcept;

  uint64_t limit_;
  duration period_;
  duration width_;
  /// Oldest first; at most `token_window_buckets`. Mutable: reading at a
  /// later `now` drops the buckets that left the window.
  mutable std::vector<bucket> buckets_;
  uint64_t in_flight_ = 0;
};

} // namespace sluice::policy
