#include "sluice/runtime/policy/spend/provider_headroom.hpp"

#include <algorithm>

namespace sluice::policy {

void provider_headroom::lane::take(const limit_lane& l,
                                   time_point now) noexcept {
  if (l.empty())
    return;
  // What is left counts only with the instant it is full again: without
  // one, holding a call back could hold it for ever.
  // A source in another process hands these over the wire: bounded here
  // as the header parser bounds them.
  std::optional<uint64_t> said = l.reset ? l.remaining : std::nullopt;
  if (said)
    said = std::min(*said, provider_count_saturation);
  auto reset = std::clamp(l.reset.value_or(duration::zero()), duration::zero(),
                          provider_reset_saturation);
  if (said)
    said = *said > in_flight ? *said - in_flight : 0;
  // Until the known reset, what is left only falls: an answer to an
  // earlier request may arrive after a later one's and say more.
  if (said && known(now) && *said > *left)
    return;
  limit = l.limit;
  left = said;
  reset_at = now + reset;
}

bool provider_headroom::lane::known(time_point now) const noexcept {
  return left.has_value() && now < reset_at;
}

void provider_headroom::lane::spend(uint64_t n, time_point now) noexcept {
  in_flight = n > UINT64_MAX - in_flight ? UINT64_MAX : in_flight + n;
  if (known(now))
    left = *left > n ? *left - n : 0;
}

bool provider_headroom::lane::short_for(uint64_t n,
                                        time_point now) const noexcept {
  if (!known(now) || n <= *left)
    return false;
  // Larger than the whole limit: never fits, so waiting is no use.
  return !(limit && n > *limit);
}

void provider_headroom::answered(uint64_t tokens, const provider_limits& limits,
                                 time_point now) noexcept {
  abandoned(tokens);
  requests_.take(limits.requests, now);
  tokens_.take(limits.token_lane(), now);
}

void provider_headroom::abandoned(uint64_t tokens) noexcept {
  requests_.done(1);
  tokens_.done(tokens);
}

provider_headroom::verdict
provider_headroom::check(uint64_t tokens, time_point now) const noexcept {
  verdict v;
  if (requests_.short_for(1, now)) {
    v.go = false;
    v.not_before = requests_.reset_at;
  }
  if (tokens > 0 && tokens_.short_for(tokens, now)) {
    v.not_before =
        v.go ? tokens_.reset_at : std::max(v.not_before, tokens_.reset_at);
    v.go = false;
  }
  return v;
}

uint64_t provider_headroom::sent(uint64_t tokens, time_point now) noexcept {
  if (tokens_.limit && tokens > *tokens_.limit)
    tokens = 0;
  requests_.spend(1, now);
  tokens_.spend(tokens, now);
  return tokens;
}

provider_headroom::verdict provider_headroom::take(uint64_t tokens,
                                                   time_point now) noexcept {
  auto v = check(tokens, now);
  if (v.go)
    v.counted = sent(tokens, now);
  return v;
}

std::optional<uint64_t>
provider_headroom::requests_left(time_point now) const noexcept {
  return requests_.known(now) ? requests_.left : std::nullopt;
}

std::optional<uint64_t>
provider_headroom::tokens_left(time_point now) const noexcept {
  return tokens_.known(now) ? tokens_.left : std::nullopt;
}

} // namespace sluice::policy
