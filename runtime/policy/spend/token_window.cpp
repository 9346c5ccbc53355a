#include "sluice/runtime/policy/spend/token_window.hpp"

#include <algorithm>
#include <limits>

#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::policy {

token_window::token_window(uint64_t limit, duration period)
    : limit_(limit)
    , period_(period)
    , width_(period / token_window_buckets) {
  if (limit == 0)
    throw field_error("limit", "must be at least 1 token");
  if (width_ <= duration::zero())
    throw field_error("period", "must be positive");
  buckets_.reserve(token_window_buckets);
}

void token_window::set_limit(uint64_t limit) {
  if (limit == 0)
    throw field_error("limit", "must be at least 1 token");
  limit_ = limit;
}

uint64_t token_window::add(uint64_t a, uint64_t b) noexcept {
  return a > std::numeric_limits<uint64_t>::max() - b
             ? std::numeric_limits<uint64_t>::max()
             : a + b;
}

void token_window::expire(time_point now) const noexcept {
  auto gone =
      std::find_if(buckets_.begin(), buckets_.end(), [&](const bucket& b) {
        return now < b.start + width_ + period_;
      });
  buckets_.erase(buckets_.begin(), gone);
}

uint64_t token_window::used(time_point now) const noexcept {
  expire(now);
  uint64_t sum = 0;
  for (auto& b : buckets_)
    sum = add(sum, b.tokens);
  return sum;
}

uint64_t token_window::remaining(time_point now) const noexcept {
  auto taken = add(used(now), in_flight_);
  return taken >= limit_ ? 0 : limit_ - taken;
}

duration token_window::reset_after(time_point now) const noexcept {
  expire(now);
  if (buckets_.empty())
    return duration::zero();
  return buckets_.back().start + width_ + period_ - now;
}

token_window::grant token_window::reserve(uint64_t n, time_point now) {
  grant g;
  if (n > limit_) {
    g.too_large = true;
    g.remaining = remaining(now);
    return g;
  }
  auto u = used(now);
  auto taken = add(add(u, in_flight_), n);
  if (taken <= limit_) {
    in_flight_ += n;
    g.ok = true;
    g.remaining = limit_ - taken;
    return g;
  }
  g.remaining = remaining(now);
  // How much of the used tokens has to leave: the oldest buckets first.
  auto in_flight_and_n = add(in_flight_, n);
  if (in_flight_and_n > limit_)
    return g; // only the calls in flight can make room
  uint64_t must_leave = u - (limit_ - in_flight_and_n);
  uint64_t left = 0;
  for (auto& b : buckets_) {
    left = add(left, b.tokens);
    if (left >= must_leave) {
      g.retry_after = b.start + width_ + period_ - now;
      break;
    }
  }
  return g;
}

void token_window::settle(uint64_t reserved, uint64_t used_tokens,
                          time_point now) {
  in_flight_ -= std::min(reserved, in_flight_);
  if (used_tokens == 0)
    return;
  expire(now);
  if (!buckets_.empty() && now < buckets_.back().start + width_) {
    buckets_.back().tokens = add(buckets_.back().tokens, used_tokens);
    return;
  }
  if (buckets_.size() == token_window_buckets) {
    // Every bucket still in the window: fold the oldest into the next (it
    // then leaves with the next, later than it would have: never early).
    buckets_[1].tokens = add(buckets_[1].tokens, buckets_[0].tokens);
    buckets_.erase(buckets_.begin());
  }
  buckets_.push_back({now, used_tokens});
}

} // namespace sluice::policy
