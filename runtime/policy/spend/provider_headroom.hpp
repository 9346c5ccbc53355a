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
/// upstream after that request), less what the calls still in flight
/// reserved -- the upstream may not have counted them yet, and answers
/// arrive in any order, so this errs towards holding back; until its reset,
/// what is known to be left only falls (an answer saying more is an
/// earlier request's, arriving late); each call sent
/// after them counts one request and its reserved tokens against what they
/// left. Once a lane's
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
    /// `take`: the tokens counted for it (see `sent`).
    uint64_t counted = 0;
  };

  /// Whether a call of `tokens` (its reservation) can be sent at `now`.
  verdict check(uint64_t tokens, time_point now) const noexcept;

  /// A call of `tokens` was sent at `now`: one request and its tokens
  /// less, in flight until `answered` or `abandoned`. Returns the tokens
  /// counted: none for a call larger than the whole known limit (the
  /// upstream refuses it without counting it; it must not hold back
  /// every other call until the reset).
  uint64_t sent(uint64_t tokens, time_point now) noexcept;

  /// `check`, and when the call may go, `sent`; `counted` in the verdict.
  verdict take(uint64_t tokens, time_point now) noexcept;

  /// A call sent with `counted` tokens was answered at `now`, the
  /// answer's headers saying `limits` (an answer without any leaves what
  /// is known as it was).
  void answered(uint64_t counted, const provider_limits& limits,
                time_point now) noexcept;

  /// A call sent with `counted` tokens ended without an answer.
  void abandoned(uint64_t counted) noexcept;

  /// Requests and tokens of calls sent and not yet answered.
  uint64_t requests_in_flight() const noexcept { return requests_.in_flight; }
  uint64_t tokens_in_flight() const noexcept { return tokens_.in_flight; }

  /// What is known to be left now (nothing: unknown, or reset since).
  std::optional<uint64_t> requests_left(time_point now) const noexcept;
  std::optional<uint64_t> tokens_left(time_point now) const noexcept;

private:
  struct lane {
    std::optional<uint64_t> limit;
    std::optional<uint64_t> left;
    /// When it is full again; `left` is known only with it.
    time_point reset_at{};
    /// Sent and not yet answered.
    uint64_t in_flight = 0;

    void take(const limit_lane& l, time_point now) noexcept;
    void done(uint64_t n) noexcept {
      in_flight = in_flight > n ? in_flight - n : 0;
    }
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
