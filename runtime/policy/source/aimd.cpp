#include "sluice/runtime/policy/source/aimd.hpp"
#include "sluice/runtime/policy/field_error.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace sluice::policy {

void validate(const aimd_config& cfg) {
  auto refuse = [](const char* field, const std::string& why) {
    throw field_error(field, why);
  };
  if (cfg.min == 0)
    refuse("min", "must be at least 1");
  if (cfg.max < cfg.min)
    refuse("max", "must be at least min");
  if (cfg.initial < cfg.min || cfg.initial > cfg.max)
    refuse("initial", "must be within [min, max]");
  if (cfg.increase == 0)
    refuse("increase", "must be at least 1");
  if (!(cfg.decrease_ratio > 0.0 && cfg.decrease_ratio < 1.0))
    refuse("decrease_ratio",
           "must be in (0, 1), got " + std::to_string(cfg.decrease_ratio));
}

aimd_limit::aimd_limit(const aimd_config& cfg)
    : cfg_((validate(cfg), cfg))
    , limit_(cfg.initial) {
  // nop
}

void aimd_limit::reconfigure(const aimd_config& cfg) {
  validate(cfg);
  cfg_ = cfg;
  limit_ = std::clamp(limit_, cfg.min, cfg.max);
}

void aimd_limit::on_success(uint32_t in_flight) noexcept {
  // 64-bit: `in_flight` is any count a caller hands over.
  auto seen = 2 * static_cast<uint64_t>(in_flight);
  if (seen < limit_)
    return;
  auto grown = static_cast<uint64_t>(limit_) + cfg_.increase;
  if (in_slow_start())
    grown = std::max(grown, seen);
  limit_ = static_cast<uint32_t>(std::min<uint64_t>(cfg_.max, grown));
}

void aimd_limit::on_drop() noexcept {
  dropped_ = true;
  auto shrunk = static_cast<uint32_t>(std::floor(limit_ * cfg_.decrease_ratio));
  limit_ = std::max(cfg_.min, shrunk);
}

void aimd_limit::on_outcome(outcome_kind kind, uint32_t in_flight) noexcept {
  switch (kind) {
  case outcome_kind::ok:
    on_success(in_flight);
    break;
  case outcome_kind::rate_limited:
  case outcome_kind::timeout:
    on_drop();
    break;
  case outcome_kind::transient:
  case outcome_kind::permanent:
    break;
  }
}

} // namespace sluice::policy
