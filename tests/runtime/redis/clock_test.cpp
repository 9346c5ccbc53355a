// The Redis clocks: the steady one waits in real time (briefly), the manual
// one only moves, and wakes its waiters, when the test advances it.

#include "sluice/runtime/redis/clock.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <catch2/catch.hpp>

#include "fakes/manual_redis_clock.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::manual_redis_clock;

TEST_CASE("the steady redis clock waits until its time or until done") {
  auto clock = real_redis_clock();
  CHECK(clock.get() == real_redis_clock().get()); // one, shared
  std::mutex mx;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lk{mx};
  auto t0 = clock->now();
  CHECK_FALSE(clock->wait_until(lk, cv, t0 + 20ms, [] { return false; }));
  CHECK(clock->now() >= t0 + 20ms);
  CHECK(lk.owns_lock());
  CHECK(clock->wait_until(lk, cv, t0 + 1h, [] { return true; }));
}

TEST_CASE("the manual redis clock moves only when advanced") {
  manual_redis_clock clock;
  auto t0 = clock.now();
  std::this_thread::sleep_for(2ms); // real time passes, virtual does not
  CHECK(clock.now() == t0);
  clock.advance(10min);
  CHECK(clock.now() == t0 + 10min);
}

TEST_CASE("a manual clock's waiter wakes when its time comes and not before") {
  manual_redis_clock clock;
  auto until = clock.now() + 1s;
  std::mutex mx;
  std::condition_variable cv;
  std::atomic<int> result{-1};
  std::thread waiter{[&] {
    std::unique_lock<std::mutex> lk{mx};
    result = clock.wait_until(lk, cv, until, [] { return false; }) ? 1 : 0;
  }};
  REQUIRE(clock.await_waiters(1));
  clock.advance(1s - 1ns);
  // Woken, it looked at the time and blocks again.
  REQUIRE(clock.await_waiters(1));
  CHECK(result == -1);
  CHECK(clock.expired() == 0);
  clock.advance(1ns);
  waiter.join();
  CHECK(result == 0);
  CHECK(clock.expired() == 1);
}

TEST_CASE("a manual clock's waiter wakes when done whatever the time") {
  manual_redis_clock clock;
  std::mutex mx;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<int> result{-1};
  std::thread waiter{[&] {
    std::unique_lock<std::mutex> lk{mx};
    result = clock.wait_until(lk, cv, clock.now() + 1h, [&] { return stop; })
                 ? 1
                 : 0;
  }};
  REQUIRE(clock.await_waiters(1));
  {
    std::lock_guard<std::mutex> guard{mx};
    stop = true;
  }
  cv.notify_all();
  waiter.join();
  CHECK(result == 1);
  CHECK(clock.expired() == 0);
}
