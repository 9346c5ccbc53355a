#include "sluice/runtime/policy/source/exchange_deadline.hpp"

#include <algorithm>

namespace sluice::policy {

namespace {

time_point capped(time_point t, std::optional<time_point> limit) noexcept {
  return limit ? std::min(t, *limit) : t;
}

} // namespace

time_point setup_deadline(const exchange_timeouts& t, time_point now,
                          std::optional<time_point> attempt_deadline) noexcept {
  return capped(now + t.connect, attempt_deadline);
}

time_point read_deadline(const exchange_timeouts& t, time_point sent,
                         bool body_started, time_point now,
                         std::optional<time_point> attempt_deadline) noexcept {
  auto next = body_started ? now + t.idle : sent + t.first_byte;
  return capped(std::min(next, sent + t.response), attempt_deadline);
}

} // namespace sluice::policy
