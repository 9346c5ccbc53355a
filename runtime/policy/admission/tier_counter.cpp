#include "sluice/runtime/policy/admission/tier_counter.hpp"

#include <stdexcept>
#include <string>

namespace sluice::policy {

tier_counter::tier_counter(uint32_t cap)
    : cap_(cap) {
  if (cap == 0 || cap > max_cap)
    throw std::invalid_argument("tier cap must be in [1, " +
                                std::to_string(max_cap) + "], got " +
                                std::to_string(cap));
}

bool tier_counter::try_acquire() noexcept {
  auto w = word_.load(std::memory_order_relaxed);
  for (;;) {
    auto s = unpack(w);
    if (s.waiting != 0 || s.in_use >= cap())
      return false;
    if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                    std::memory_order_relaxed))
      return true;
  }
}

void tier_counter::add_waiter() noexcept {
  word_.fetch_add(waiter_unit, std::memory_order_acq_rel);
}

bool tier_counter::try_grant_waiter() noexcept {
  auto w = word_.load(std::memory_order_relaxed);
  for (;;) {
    auto s = unpack(w);
    if (s.waiting == 0 || s.in_use >= cap())
      return false;
    if (word_.compare_exchange_weak(w, w - waiter_unit + 1,
                                    std::memory_order_acq_rel,
                                    std::memory_order_relaxed))
      return true;
  }
}

void tier_counter::remove_waiter() noexcept {
  auto w = word_.load(std::memory_order_relaxed);
  while (unpack(w).waiting != 0 &&
         !word_.compare_exchange_weak(w, w - waiter_unit,
                                      std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
    // retry with the refreshed word
  }
}

bool tier_counter::release() noexcept {
  auto w = word_.load(std::memory_order_relaxed);
  for (;;) {
    auto s = unpack(w);
    if (s.in_use == 0)
      return s.waiting != 0;
    if (word_.compare_exchange_weak(w, w - 1, std::memory_order_acq_rel,
                                    std::memory_order_relaxed))
      return s.waiting != 0;
  }
}

} // namespace sluice::policy
