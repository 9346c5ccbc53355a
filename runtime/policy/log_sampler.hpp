#pragma once

// Which access-log lines of refused requests are written (issue 30,
// finding 11: 20 s of unauthenticated 401s wrote 78 MB of log).

#include <cstdint>

#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/policy/source/token_bucket.hpp"

namespace sluice::policy {

/// Lines of refused requests from clients without a known key written per
/// second on average, and in a burst (beyond, they are counted, not
/// written): the red team's flood of 401s with 7 KB paths (3.9 MB/s
/// before) writes ~550-byte lines (fields cut, runtime/node/access_log.hpp)
/// at 20/s: ~40 MB an hour.
constexpr double refusal_lines_per_s = 20.0;
constexpr uint32_t refusal_lines_burst = 200;

/// Whether a line is one of a floodable kind: a 4xx answered to a request
/// no client key was known for (refused on its header, unknown path, bad
/// framing, anonymous rate limit). Calls by a key and every 2xx/5xx are
/// always written.
constexpr bool sampled_line(unsigned status, bool key_known) noexcept {
  return !key_known && status >= 400 && status < 500;
}

/// Rate-limits the sampled lines with a token bucket and counts those left
/// out: the next line written says how many (`take_suppressed`).
///
/// Pure (time is an argument) and not thread-safe: the owner locks.
class log_sampler {
public:
  explicit log_sampler(time_point now,
                       quota_config rate = {refusal_lines_per_s,
                                            refusal_lines_burst})
      : bucket_(rate, now) {
    // nop
  }

  /// Whether a line of `status` (`key_known`: a client key was found for
  /// the request) is written at `now`; if not, it is counted.
  bool admit(unsigned status, bool key_known, time_point now) noexcept {
    if (!sampled_line(status, key_known) || bucket_.try_take(now))
      return true;
    ++suppressed_;
    return false;
  }

  /// Lines left out since the last call (the written line carries it).
  uint64_t take_suppressed() noexcept {
    auto n = suppressed_;
    suppressed_ = 0;
    return n;
  }

  uint64_t suppressed() const noexcept { return suppressed_; }

private:
  token_bucket bucket_;
  uint64_t suppressed_ = 0;
};

} // namespace sluice::policy
