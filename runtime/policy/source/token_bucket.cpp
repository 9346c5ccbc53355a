#include "sluice/runtime/policy/source/token_bucket.hpp"
#include "sluice/runtime/policy/field_error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sluice::policy {

void validate(const quota_config& cfg) {
  if (!(cfg.rate_per_s > 0.0) || !std::isfinite(cfg.rate_per_s))
    throw field_error("rate_per_s", "must be a positive rate, got " +
                                        std::to_string(cfg.rate_per_s));
  if (cfg.burst == 0)
    throw field_error("burst", "must be at least 1");
}

token_bucket::token_bucket(const quota_config& cfg, time_point now)
    : cfg_((validate(cfg), cfg))
    , tokens_(cfg.burst)
    , last_(now) {
  // nop
}

void token_bucket::refill(time_point now) noexcept {
  if (now <= last_)
    return;
  std::chrono::duration<double> dt = now - last_;
  tokens_ =
      std::min<double>(cfg_.burst, tokens_ + dt.count() * cfg_.rate_per_s);
  last_ = now;
}

bool token_bucket::try_take(time_point now) noexcept {
  refill(now);
  if (tokens_ < 1.0)
    return false;
  tokens_ -= 1.0;
  return true;
}

uint32_t token_bucket::available(time_point now) noexcept {
  refill(now);
  return static_cast<uint32_t>(std::floor(tokens_));
}

duration token_bucket::until_full(time_point now) noexcept {
  refill(now);
  std::chrono::duration<double> wait{(cfg_.burst - tokens_) / cfg_.rate_per_s};
  return std::chrono::duration_cast<duration>(wait);
}

time_point token_bucket::next_token(time_point now) noexcept {
  refill(now);
  if (tokens_ >= 1.0)
    return now;
  std::chrono::duration<double> wait{(1.0 - tokens_) / cfg_.rate_per_s};
  return now + std::chrono::duration_cast<duration>(wait) + duration{1};
}

} // namespace sluice::policy
