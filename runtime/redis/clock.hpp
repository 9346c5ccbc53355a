#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// The time the Redis client and worker go by: their deadlines, the pause
/// after a failed connect, the pause between PINGs while Redis is down.
/// Injected so that tests drive it (a manual clock) instead of sleeping;
/// the default is the steady clock. Hiredis's own socket timeouts are not
/// on it: the kernel keeps those, in real time.
///
/// Shared between threads: implementations are thread-safe.
class redis_clock {
public:
  virtual ~redis_clock() = default;

  /// The current time.
  virtual time_point now() const = 0;

  /// Blocks on `cv` until `done()` holds or this clock reaches `until`;
  /// returns `done()`. `lk` locks the mutex guarding what `done` reads, on
  /// entry and on return, as for `std::condition_variable::wait_until`.
  /// NOTE: an implementation may let go of `lk` for a moment besides while
  /// blocked (the manual clock does, to register its waiter), so the caller
  /// must not rely on state it read under `lk` before the call.
  virtual bool wait_until(std::unique_lock<std::mutex>& lk,
                          std::condition_variable& cv, time_point until,
                          const std::function<bool()>& done) = 0;
};

/// The steady clock: what every Redis user here runs on outside tests.
class steady_redis_clock final : public redis_clock {
public:
  time_point now() const override { return steady::now(); }

  bool wait_until(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                  time_point until,
                  const std::function<bool()>& done) override {
    return cv.wait_until(lk, until, done);
  }
};

/// The one steady clock, shared (it has no state): the default of every
/// client and worker.
inline std::shared_ptr<redis_clock> real_redis_clock() {
  static const auto instance = std::make_shared<steady_redis_clock>();
  return instance;
}

} // namespace sluice
