#include "sluice/runtime/policy/call/stall_clock.hpp"

#include <algorithm>

namespace sluice::policy {

duration stall_clock::covered(time_point from, time_point to) const noexcept {
  duration out{};
  for (auto& [a, b] : done_) {
    auto lo = std::max(a, from);
    auto hi = std::min(b, to);
    if (hi > lo)
      out += hi - lo;
  }
  return out;
}

time_point stall_clock::earliest_open() const noexcept {
  auto from = first_open_.second;
  for (auto& o : more_open_)
    from = std::min(from, o.second);
  return from;
}

duration stall_clock::stalled(time_point now) const noexcept {
  auto productive = productive_;
  if (attempting()) {
    // Open attempts all run until now: their union is [earliest, now].
    auto from = earliest_open();
    if (now > from)
      productive += (now - from) - covered(from, now);
  }
  return now - entered_at_ - productive;
}

stall_clock::attempt_id stall_clock::begin_attempt(time_point now) {
  auto id = next_id_++;
  if (first_open_.first == 0)
    first_open_ = {id, now};
  else
    more_open_.emplace_back(id, now);
  return id;
}

void stall_clock::end_attempt(attempt_id id, time_point now, bool refund) {
  if (id == 0)
    return;
  time_point started;
  if (first_open_.first == id) {
    started = first_open_.second;
    if (more_open_.empty()) {
      first_open_ = {};
    } else {
      first_open_ = more_open_.front();
      more_open_.erase(more_open_.begin());
    }
  } else {
    auto i = std::find_if(more_open_.begin(), more_open_.end(),
                          [id](auto& o) { return o.first == id; });
    if (i == more_open_.end())
      return;
    started = i->second;
    more_open_.erase(i);
  }
  // Only what the union does not hold yet is new productive time.
  if (!refund && now > started)
    productive_ += (now - started) - covered(started, now);
  // Keep only intervals an attempt still open may overlap: a later attempt
  // begins at or after now, past every finished one. With none open (no
  // hedging: every call's last attempt) nothing is kept, and nothing need
  // be merged first.
  if (!attempting()) {
    done_.clear();
    return;
  }
  if (!refund && now > started) {
    // Merged in place: sorted and disjoint again.
    done_.emplace_back(started, now);
    std::sort(done_.begin(), done_.end());
    size_t n = 0;
    for (auto& iv : done_) {
      if (n > 0 && iv.first <= done_[n - 1].second)
        done_[n - 1].second = std::max(done_[n - 1].second, iv.second);
      else
        done_[n++] = iv;
    }
    done_.resize(n);
  }
  auto earliest = earliest_open();
  done_.erase(
      std::remove_if(done_.begin(), done_.end(),
                     [earliest](auto& iv) { return iv.second <= earliest; }),
      done_.end());
}

} // namespace sluice::policy
