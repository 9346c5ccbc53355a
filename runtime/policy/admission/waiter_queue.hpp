#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// FIFO queue of callers waiting for a permit, each with its own deadline.
///
/// Waiters leave from the front (granted) or from anywhere (deadline passed,
/// holder gone). Removal from the middle is O(1): the waiter is dropped from
/// the index and its slot in the order is skipped when it reaches the front.
/// `Payload` is whatever the owner needs to answer the waiter later.
template <class Payload>
class waiter_queue {
public:
  /// Identifies a waiter for the lifetime of its queue; never reused, so a
  /// stale timer naming a departed waiter matches nothing.
  using waiter_id = uint64_t;

  struct waiter {
    time_point deadline;
    Payload payload;
  };

  /// Appends a waiter and returns its id.
  waiter_id push(time_point deadline, Payload payload) {
    auto id = next_id_++;
    index_.emplace(id, waiter{deadline, std::move(payload)});
    order_.push_back(id);
    return id;
  }

  /// Returns the id of the longest-waiting waiter; the queue must not be
  /// empty.
  waiter_id front_id() {
    skip_departed();
    return order_.front();
  }

  /// Returns the waiter `id`, or `nullptr` if it is no longer queued.
  waiter* find(waiter_id id) {
    auto i = index_.find(id);
    return i == index_.end() ? nullptr : &i->second;
  }

  /// Removes waiter `id` (which must be queued) and returns it.
  waiter take(waiter_id id) {
    auto i = index_.find(id);
    auto result = std::move(i->second);
    index_.erase(i);
    if (order_.size() > 2 * index_.size() + compact_slack)
      compact();
    return result;
  }

  bool empty() const noexcept { return index_.empty(); }

  size_t size() const noexcept { return index_.size(); }

  /// Calls `f(id, waiter&)` for every queued waiter in FIFO order.
  template <class F>
  void for_each(F f) {
    for (auto id : order_)
      if (auto w = find(id))
        f(id, *w);
  }

private:
  static constexpr size_t compact_slack = 32;

  void skip_departed() {
    while (!order_.empty() && index_.count(order_.front()) == 0)
      order_.pop_front();
  }

  // Keeps the order from growing without bound when many waiters leave from
  // the middle while an old waiter stays at the front.
  void compact() {
    std::deque<waiter_id> live;
    for (auto id : order_)
      if (index_.count(id) != 0)
        live.push_back(id);
    order_.swap(live);
  }

  waiter_id next_id_ = 1;
  std::deque<waiter_id> order_;
  std::unordered_map<waiter_id, waiter> index_;
};

} // namespace sluice::policy
