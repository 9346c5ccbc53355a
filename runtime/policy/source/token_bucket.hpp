#pragma once

#include <cstdint>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// A source's rate quota: `rate` calls per second on average, bursts of up
/// to `burst`.
struct quota_config {
  double rate_per_s = 10.0;
  uint32_t burst = 10;
};

/// Throws `std::invalid_argument` naming the field of a nonsense setting.
void validate(const quota_config& cfg);

/// Token bucket behind a rate quota. Starts full. Pure: takes `now`.
class token_bucket {
public:
  /// `cfg` must pass `validate`.
  token_bucket(const quota_config& cfg, time_point now);

  /// Takes a token if one is available at `now`.
  bool try_take(time_point now) noexcept;

  /// Whole tokens available at `now`, and how long until the bucket is
  /// full (OpenAI's `x-ratelimit-remaining-requests` and `-reset-requests`).
  uint32_t available(time_point now) noexcept;
  duration until_full(time_point now) noexcept;

  uint32_t burst() const noexcept { return cfg_.burst; }

  /// The earliest instant a token is available (`now` if one is).
  time_point next_token(time_point now) noexcept;

private:
  void refill(time_point now) noexcept;

  quota_config cfg_;
  double tokens_;
  time_point last_;
};

} // namespace sluice::policy
