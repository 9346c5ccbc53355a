#include "fakes/memory_lease_store.hpp"

namespace sluice::testing {

void memory_lease_store::decide(const std::function<void(grant)>& done) {
  grant g;
  if (fail_next_) {
    fail_next_ = false;
    g.fault = fail_fault_;
    g.late = fail_late_;
    g.error = "memory store: failed as told";
  } else if (down_) {
    g.error = "memory store: down";
  } else {
    g.answered = true;
    if (live_.size() < cap_) {
      g.granted = true;
      g.permit = "p" + std::to_string(next_++);
      live_.insert(g.permit);
    } else {
      g.retry_in = retry_in_;
    }
  }
  done(std::move(g));
}

void memory_lease_store::try_acquire(duration within,
                                     std::function<void(grant)> done) {
  ++acquires;
  last_within = within;
  if (hold_) {
    held_.push_back(std::move(done));
    return;
  }
  decide(done);
}

size_t memory_lease_store::answer_held() {
  size_t n = 0;
  while (!held_.empty()) {
    auto done = std::move(held_.front());
    held_.pop_front();
    decide(done);
    ++n;
  }
  return n;
}

void memory_lease_store::release(const std::string& permit) {
  ++releases;
  live_.erase(permit);
}

void memory_lease_store::renew(std::vector<std::string> permits,
                               std::function<void(lapsed)> done) {
  ++renewals;
  if (down_) {
    done(std::nullopt);
    return;
  }
  std::vector<std::string> gone;
  for (auto& p : permits)
    if (live_.count(p) == 0)
      gone.push_back(p);
  done(std::move(gone));
}

} // namespace sluice::testing
