#include "fakes/manual_redis_clock.hpp"

#include <algorithm>

namespace sluice::testing {

manual_redis_clock::manual_redis_clock()
    : now_(steady::now()) {
  // nop
}

time_point manual_redis_clock::now() const {
  std::lock_guard<std::mutex> guard{state_mx_};
  return now_;
}

bool manual_redis_clock::wait_until(std::unique_lock<std::mutex>& lk,
                                    std::condition_variable& cv,
                                    time_point until,
                                    const std::function<bool()>& done) {
  waiter self{lk.mutex(), &cv};
  // Registering needs `list_mx_`, which `advance` holds while it locks
  // waiters' mutexes: take it only with ours released (no lock cycle).
  lk.unlock();
  {
    std::lock_guard<std::mutex> guard{list_mx_};
    waiters_.push_back(&self);
  }
  lk.lock();
  bool finished = false;
  for (;;) {
    if (done()) {
      finished = true;
      break;
    }
    {
      std::lock_guard<std::mutex> guard{state_mx_};
      if (now_ >= until) {
        ++expired_;
        break;
      }
      // Seen the time and going to block: `advance` can wake us only once
      // we are in `cv.wait` (it takes our mutex to notify), so no wake-up
      // falls between this look and the wait.
      self.blocked = true;
      ++blocked_;
    }
    state_cv_.notify_all();
    cv.wait(lk);
    std::lock_guard<std::mutex> guard{state_mx_};
    if (self.blocked) {
      self.blocked = false;
      --blocked_;
    }
  }
  lk.unlock();
  {
    std::lock_guard<std::mutex> guard{list_mx_};
    waiters_.remove(&self);
  }
  state_cv_.notify_all();
  lk.lock();
  return finished;
}

void manual_redis_clock::advance(duration d) {
  std::lock_guard<std::mutex> list_guard{list_mx_};
  {
    std::lock_guard<std::mutex> guard{state_mx_};
    now_ += d;
    // Nobody has seen the new time yet.
    for (auto* w : waiters_)
      w->blocked = false;
    blocked_ = 0;
  }
  for (auto* w : waiters_) {
    std::lock_guard<std::mutex> guard{*w->mx};
    w->cv->notify_all();
  }
}

bool manual_redis_clock::await_waiters(size_t n,
                                       std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk{state_mx_};
  return state_cv_.wait_for(lk, limit, [&] { return blocked_ >= n; });
}

size_t manual_redis_clock::expired() const {
  std::lock_guard<std::mutex> guard{state_mx_};
  return expired_;
}

} // namespace sluice::testing
