#pragma once

#include <cstdint>
#include <optional>

#include "sluice/runtime/policy/spend/provider_limits.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// What a source's upstream has left of its own limits, as its answers'
/// rate-limit headers said (SPEC §12), less what was sent since: the one
/// place that decides whether a call can be sent to it now or would be
/// answered 429. Pure: takes `now`; not thread-safe (its source's gate
/// owns it).
///
/// An answer's headers replace what the last one said (they describe the
/// upstream after that request); each call sent after them counts one
/// request and its reserved tokens against what they left. Once a lane's
/// reset has passed (or an answer said what remains but not when it
/// resets), nothing is known of it until the next answer, and calls go. A call
/// larger than a whole limit goes too: waiting would not make it fit, and the
/// upstream's own answer says best what is wrong.
class provider_headroom {
public:
  /// The verdict for one call.
  struct verdict {
    /// Send it now.
    bool go = true;
    /// Otherwise, the instant the lane that is short is full again.
    time_point not_before{};
  };

  /// An answer arrived at `now` with these headers (an answer without any
  /// leaves the state as it was).
  void observe(const provider_limits& limits, time_point now) noexcept;

  /// Whether a call of `tokens` (its reservation) can be sent at `now`.
  verdict check(uint64_t tokens, time_point now) const noexcept;

  /// A call of `tokens` was sent at `now`: one request and its tokens less.
  void sent(uint64_t tokens, time_point now) noexcept;

  /// What is known to be left now (nothing: unknown, or reset since).
  std::optional<uint64_t> requests_left(time_point now) const noexcept;
  std::optional<uint64_t> tokens_left(time_point now) const noexcept;

private:
  struct lane {
    std::optional<uint64_t> limit;
    std::optional<uint64_t> left;
    /// When it is full again; `left` is known only with it.
    time_point reset_at{};

    void take(const limit_lane& l, time_point now) noexcept;
    bool known(time_point now) const noexcept;
    void spend(uint64_t n, time_point now) noexcept;
    /// Short for `n`: known, `n` more than is left, and not more than the
    /// whole limit.
    bool short_for(uint64_t n, time_point now) const noexcept;
  };

  lane requests_;
  lane tokens_;
};

} // namespace sluice::policy
