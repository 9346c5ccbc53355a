#include "sluice/actors/loops/loop_guard.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"

namespace sluice {

boost::asio::io_context* this_thread_loop() noexcept {
  return loop_scheduler::current_loop();
}

bool on_loop_thread() noexcept {
  return loop_scheduler::current_loop() != nullptr;
}

namespace {

std::atomic<unsigned long long> blocking_calls{0};
std::atomic<bool> abort_on_block{true};

} // namespace

unsigned long long blocking_calls_on_loops() noexcept {
  return blocking_calls.load();
}

void abort_on_blocking_loop(bool abort) noexcept {
  abort_on_block = abort;
}

void assert_not_on_loop(const char* what) noexcept {
  if (!on_loop_thread())
    return;
  ++blocking_calls;
  try {
    static log_limit lim;
    log_limited(lim, spdlog::level::critical,
                "a blocking call ran on an event loop's thread: {}; every "
                "connection and actor of that loop waits meanwhile",
                what);
  } catch (...) {
    // logging failed: the abort below still says it in a debug build
  }
#if !defined(NDEBUG) || defined(SLUICE_DEBUG_CHECKS)
  if (!abort_on_block)
    return;
  std::fprintf(stderr, "sluice: blocking call on an event loop: %s\n", what);
  std::abort();
#endif
}

} // namespace sluice
