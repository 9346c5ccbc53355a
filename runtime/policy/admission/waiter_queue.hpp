#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// FIFO queue of callers waiting for a permit, each with its own deadline.
///
/// Waiters leave from the front (granted) or from anywhere (deadline passed,
/// holder gone). Removal from the middle is O(1) in the order (the waiter is
/// dropped from the index and its slot skipped when it reaches the front)
/// and O(log n) in the deadlines. The queue owns its expiry, as Seastar's
/// `expiring_fifo` does: it knows its earliest deadline and hands over the
/// waiters whose deadline passed, so an owner arms one timer for the whole
/// queue (SPEC §1: a waiter whose deadline passes leaves at that moment).
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
    by_deadline_.emplace(deadline, id);
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
    by_deadline_.erase({result.deadline, id});
    if (order_.size() > 2 * index_.size() + compact_slack)
      compact();
    return result;
  }

  /// The earliest deadline of a queued waiter; none when the queue is empty.
  std::optional<time_point> earliest_deadline() const {
    if (by_deadline_.empty())
      return std::nullopt;
    return by_deadline_.begin()->first;
  }

  /// Removes every waiter whose deadline passed at `now`
  /// (`deadline_passed`) and returns them, earliest deadline first.
  std::vector<std::pair<waiter_id, waiter>> take_expired(time_point now) {
    std::vector<std::pair<waiter_id, waiter>> out;
    while (!by_deadline_.empty()
           && deadline_passed(by_deadline_.begin()->first, now)) {
      auto id = by_deadline_.begin()->second;
      out.emplace_back(id, take(id));
    }
    return out;
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
  std::set<std::pair<time_point, waiter_id>> by_deadline_;
};

} // namespace sluice::policy
