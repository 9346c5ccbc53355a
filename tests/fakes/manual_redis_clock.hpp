#pragma once

// A Redis clock the test moves by hand: the client's deadlines and reconnect
// pause and the worker's PING pause, in virtual time (hiredis's socket
// timeouts stay real). Waiters on it wake when `advance` passes their time.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>

#include "sluice/runtime/redis/clock.hpp"

namespace sluice::testing {

class manual_redis_clock final : public redis_clock {
public:
  /// Starts at the real steady time, not at an epoch of its own: a deadline
  /// taken from the real clock by mistake is then as near as the test meant
  /// it, and the test sees it expire (or not) in the wrong place.
  manual_redis_clock();

  time_point now() const override;

  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  time_point until, const std::function<bool()>& done) override;

  /// Moves time forward by `d` and wakes every waiter to look again.
  void advance(duration d);

  /// Waits (in real time, at most `limit`) until `n` threads are blocked in
  /// `wait_until` having seen the current time -- after an `advance`, only
  /// those that woke and found their time not yet come count. Returns
  /// whether they are.
  bool await_waiters(size_t n, std::chrono::milliseconds limit =
                                   std::chrono::milliseconds{5000});

  /// How many `wait_until` calls have returned because their time came.
  size_t expired() const;

private:
  struct waiter {
    std::mutex* mx;
    std::condition_variable* cv;
    /// Blocked since it last looked at the time (under `state_mx_`).
    bool blocked = false;
  };

  /// Held by `advance` while it wakes the waiters, so none leaves (and
  /// takes its mutex and condition with it) meanwhile. Never taken with a
  /// waiter's mutex held: `wait_until` lets go of it first.
  std::mutex list_mx_;
  std::list<waiter*> waiters_;

  /// The leaf lock: nothing else is taken while it is held.
  mutable std::mutex state_mx_;
  std::condition_variable state_cv_;
  time_point now_;
  size_t blocked_ = 0;
  size_t expired_ = 0;
};

} // namespace sluice::testing
