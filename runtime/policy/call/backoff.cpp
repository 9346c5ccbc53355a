#include "sluice/runtime/policy/call/backoff.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace sluice::policy {

namespace {

using seconds_d = std::chrono::duration<double>;

duration scaled(duration d, double factor) {
  return std::chrono::duration_cast<duration>(seconds_d(d) * factor);
}

} // namespace

duration backoff_delay(const backoff_config& cfg, uint32_t fails, double u,
                       std::optional<duration> retry_after) {
  auto exponent = static_cast<double>(std::max<uint32_t>(fails, 1) - 1);
  // Compute in floating point so large `fails` saturate at the cap instead
  // of overflowing.
  auto grown = seconds_d(cfg.base) * std::pow(2.0, exponent);
  auto d = grown < seconds_d(cfg.cap)
               ? std::chrono::duration_cast<duration>(grown)
               : cfg.cap;
  d = scaled(d, 1.0 - cfg.jitter * u);
  if (retry_after && *retry_after > d)
    d = *retry_after;
  return d;
}

duration poll_delay(duration interval, double u) {
  return scaled(interval, 0.5 + 0.5 * u);
}

} // namespace sluice::policy
