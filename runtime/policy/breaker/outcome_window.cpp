#include "sluice/runtime/policy/breaker/outcome_window.hpp"

#include <stdexcept>

namespace sluice::policy {

namespace {

void add(window_totals& t, window_sample s) noexcept {
  t.calls += 1;
  t.failures += s.failed ? 1 : 0;
  t.slow += s.slow ? 1 : 0;
}

void remove(window_totals& t, window_sample s) noexcept {
  t.calls -= 1;
  t.failures -= s.failed ? 1 : 0;
  t.slow -= s.slow ? 1 : 0;
}

} // namespace

count_window::count_window(uint32_t size) {
  if (size == 0)
    throw std::invalid_argument("count window size must be at least 1");
  ring_.reserve(size);
}

void count_window::record(window_sample s) noexcept {
  if (ring_.size() < ring_.capacity()) {
    ring_.push_back(s);
  } else {
    remove(totals_, ring_[next_]); // the oldest outcome leaves the window
    ring_[next_] = s;
    next_ = (next_ + 1) % static_cast<uint32_t>(ring_.size());
  }
  add(totals_, s);
}

void count_window::clear() noexcept {
  ring_.clear();
  next_ = 0;
  totals_ = {};
}

time_window::time_window(duration span, uint32_t buckets) {
  if (span <= duration::zero())
    throw std::invalid_argument("time window span must be positive");
  if (buckets == 0 || span.count() < buckets)
    throw std::invalid_argument("time window needs at least one bucket and "
                                "no more buckets than nanoseconds");
  width_ = span / buckets;
  ring_.resize(buckets);
}

void time_window::record(time_point now, window_sample s) noexcept {
  auto epoch = epoch_of(now);
  auto& b = ring_[static_cast<size_t>(epoch) % ring_.size()];
  if (b.epoch != epoch) { // the slot holds an aged-out slice: reuse it
    b.epoch = epoch;
    b.totals = {};
  }
  add(b.totals, s);
}

window_totals time_window::totals(time_point now) const noexcept {
  auto epoch = epoch_of(now);
  auto oldest = epoch - static_cast<int64_t>(ring_.size()) + 1;
  window_totals result;
  for (auto& b : ring_) {
    if (b.epoch >= oldest && b.epoch <= epoch) {
      result.calls += b.totals.calls;
      result.failures += b.totals.failures;
      result.slow += b.totals.slow;
    }
  }
  return result;
}

void time_window::clear() noexcept {
  for (auto& b : ring_)
    b = bucket{};
}

} // namespace sluice::policy
