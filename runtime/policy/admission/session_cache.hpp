#pragma once

#include <cstddef>
#include <iterator>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// The sessions a runtime keeps, by id: an entry is made on first use, kept
/// while it is busy and for `idle_ttl` after its last use, and at most
/// `cap` entries are kept -- beyond it, the least recently used idle ones
/// make room, TTL or not. Busy entries are never dropped. Whether an entry
/// is idle is the caller's to say (`idle(const T&)`): for a session tier,
/// nothing in use and nobody waiting.
///
/// NOTE: a new entry looks at no more than `max_looks` of the oldest to
/// make room, so a cache full of busy entries costs O(1) per use and lets
/// the count pass the cap (by at most the busy entries, which the caller
/// bounds: the global tier caps the calls in flight).
///
/// Pure (time is an argument) and not thread-safe: the owner locks.
template <class T>
class session_cache {
public:
  session_cache(duration idle_ttl, size_t cap, size_t max_looks = 64)
      : idle_ttl_(idle_ttl), cap_(cap), max_looks_(max_looks) {
    // nop
  }

  /// Drops the entries idle past the TTL at `now`; returns how many.
  template <class Idle>
  size_t sweep(time_point now, Idle idle) {
    size_t dropped = 0;
    for (auto i = entries_.begin(); i != entries_.end();)
      if (idle(i->second.value) && now - i->second.last_used >= idle_ttl_) {
        i = drop(i);
        ++dropped;
      } else {
        ++i;
      }
    return dropped;
  }

  /// The entry of `id`, made by `make()` if there is none (after making
  /// room), marked used at `now`.
  template <class Make, class Idle>
  T& use(const std::string& id, time_point now, Make make, Idle idle) {
    auto i = entries_.find(id);
    if (i == entries_.end()) {
      for (size_t looked = 0; entries_.size() >= cap_ && looked < max_looks_;
           ++looked) {
        auto oldest = entries_.find(order_.front());
        if (idle(oldest->second.value))
          drop(oldest);
        else // busy, so recent: to the back
          order_.splice(order_.end(), order_, oldest->second.order);
      }
      entry fresh{make(), now, order_.insert(order_.end(), id)};
      i = entries_.emplace(id, std::move(fresh)).first;
    } else {
      order_.splice(order_.end(), order_, i->second.order);
      i->second.last_used = now;
    }
    return i->second.value;
  }

  size_t size() const noexcept { return entries_.size(); }

  /// Calls `f(id, value)` for every entry, in no particular order.
  template <class F>
  void for_each(F f) const {
    for (auto& [id, e] : entries_)
      f(id, e.value);
  }

private:
  struct entry {
    T value;
    time_point last_used;
    /// Its place in `order_`.
    std::list<std::string>::iterator order;
  };
  using map_type = std::unordered_map<std::string, entry>;

  typename map_type::iterator drop(typename map_type::iterator i) {
    order_.erase(i->second.order);
    return entries_.erase(i);
  }

  duration idle_ttl_;
  size_t cap_;
  size_t max_looks_;
  map_type entries_;
  /// Ids, least recently used first.
  std::list<std::string> order_;
};

} // namespace sluice::policy
