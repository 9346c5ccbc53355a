#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <caf/actor_addr.hpp>

namespace sluice {

/// A source's attempts by requester, so that a terminated requester's
/// attempts are found at once instead of by scanning every attempt (which
/// made cancelling n parked calls cost O(n^2)).
class requester_index {
public:
  void add(const caf::actor_addr& requester, uint64_t id) {
    if (requester)
      map_.emplace(requester, id);
  }

  void remove(const caf::actor_addr& requester, uint64_t id) {
    auto [first, last] = map_.equal_range(requester);
    for (auto i = first; i != last; ++i)
      if (i->second == id) {
        map_.erase(i);
        return;
      }
  }

  /// Removes and returns the attempts of `requester`.
  std::vector<uint64_t> take(const caf::actor_addr& requester) {
    std::vector<uint64_t> ids;
    auto [first, last] = map_.equal_range(requester);
    for (auto i = first; i != last; ++i)
      ids.push_back(i->second);
    map_.erase(first, last);
    return ids;
  }

private:
  std::unordered_multimap<caf::actor_addr, uint64_t> map_;
};

} // namespace sluice
