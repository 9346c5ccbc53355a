#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>

namespace sluice {

/// A source's attempts in flight, by id and by requester: what the built-in
/// sources share. `add` monitors the requester, `take` (the attempt is
/// answered) forgets and demonitors it, and `drop_requester` finds a
/// terminated requester's attempts at once -- not by a scan, which made
/// cancelling n parked calls cost O(n^2). `Attempt` has a `requester`
/// (`caf::actor_addr`, null for an anonymous sender).
template <class Attempt>
class attempt_book {
public:
  template <class Self>
  void add(Self* self, uint64_t id, Attempt attempt) {
    auto requester = attempt.requester;
    attempts_.emplace(id, std::move(attempt));
    if (requester) {
      // One monitor per requester (one down message when it terminates).
      if (by_requester_.count(requester) == 0)
        self->monitor(requester);
      by_requester_.emplace(requester, id);
    }
  }

  /// The attempt, if it is still in flight.
  Attempt* find(uint64_t id) {
    auto i = attempts_.find(id);
    return i == attempts_.end() ? nullptr : &i->second;
  }

  /// Removes an answered attempt (nothing if it was cancelled meanwhile).
  template <class Self>
  std::optional<Attempt> take(Self* self, uint64_t id) {
    auto i = attempts_.find(id);
    if (i == attempts_.end())
      return std::nullopt;
    auto attempt = std::move(i->second);
    attempts_.erase(i);
    if (attempt.requester) {
      auto [first, last] = by_requester_.equal_range(attempt.requester);
      for (auto j = first; j != last; ++j)
        if (j->second == id) {
          by_requester_.erase(j);
          break;
        }
      // CAF 0.17's `demonitor` removes every monitor of that actor, not
      // one: only when the requester has no attempt left, or its others
      // would never be dropped when it terminates.
      if (by_requester_.count(attempt.requester) == 0)
        self->demonitor(attempt.requester);
    }
    return attempt;
  }

  /// The ids of the attempts in flight (in no order).
  std::vector<uint64_t> ids() const {
    std::vector<uint64_t> out;
    out.reserve(attempts_.size());
    for (auto& kv : attempts_)
      out.push_back(kv.first);
    return out;
  }

  /// The ids of `requester`'s attempts in flight.
  std::vector<uint64_t> ids_of(const caf::actor_addr& requester) const {
    std::vector<uint64_t> out;
    auto [first, last] = by_requester_.equal_range(requester);
    for (auto j = first; j != last; ++j)
      out.push_back(j->second);
    return out;
  }

  /// Removes the attempts of a requester that terminated; returns their ids.
  std::vector<uint64_t> drop_requester(const caf::actor_addr& requester) {
    std::vector<uint64_t> ids;
    auto [first, last] = by_requester_.equal_range(requester);
    for (auto j = first; j != last; ++j)
      if (attempts_.erase(j->second) > 0)
        ids.push_back(j->second);
    by_requester_.erase(first, last);
    return ids;
  }

private:
  std::unordered_map<uint64_t, Attempt> attempts_;
  std::unordered_multimap<caf::actor_addr, uint64_t> by_requester_;
};

} // namespace sluice
