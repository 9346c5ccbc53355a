#include "sluice/runtime/policy/call/retry_budget.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::policy {

void validate(const retry_budget_config& cfg) {
  if (!(cfg.percent >= 0 && cfg.percent <= 100))
    throw field_error("percent", "must be in [0, 100]");
  // At least one: with none a call on a quiet route could never retry.
  // Counts live in 32-bit halves of one word.
  if (cfg.min_concurrency < 1 || cfg.min_concurrency > 0x7fffffff)
    throw field_error("min_concurrency", "must be in [1, 2147483647]");
}

retry_budget::retry_budget(retry_budget_config cfg)
    : cfg_(cfg) {
  validate(cfg_);
}

retry_budget::hold::hold(hold&& other) noexcept
    : budget_(std::move(other.budget_))
    , unit_(other.unit_) {
  other.budget_.reset();
}

retry_budget::hold& retry_budget::hold::operator=(hold&& other) noexcept {
  if (this != &other) {
    reset();
    budget_ = std::move(other.budget_);
    unit_ = other.unit_;
    other.budget_.reset();
  }
  return *this;
}

void retry_budget::hold::reset() noexcept {
  if (budget_) {
    budget_->word_.fetch_sub(unit_, std::memory_order_acq_rel);
    budget_.reset();
  }
}

retry_budget::hold retry_budget::call_started() {
  word_.fetch_add(1, std::memory_order_acq_rel);
  return hold{shared_from_this(), 1};
}

uint32_t retry_budget::allowed(uint32_t active) const noexcept {
  auto share = std::floor(static_cast<double>(active) * cfg_.percent / 100.0);
  return std::max(cfg_.min_concurrency, static_cast<uint32_t>(share));
}

retry_budget::hold retry_budget::try_retry() {
  auto w = word_.load(std::memory_order_acquire);
  for (;;) {
    auto active = static_cast<uint32_t>(w);
    auto retrying = static_cast<uint32_t>(w >> 32);
    if (retrying >= allowed(active)) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
    if (word_.compare_exchange_weak(w, w + retry_unit,
                                    std::memory_order_acq_rel))
      return hold{shared_from_this(), retry_unit};
  }
}

retry_budget::snapshot retry_budget::load() const noexcept {
  auto w = word_.load(std::memory_order_acquire);
  return {static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32),
          refused_.load(std::memory_order_relaxed)};
}

} // namespace sluice::policy
