#pragma once

// The rule that nothing blocks on an event loop (SPEC §9), as a check that
// the blocking paths call first. Light on purpose (no CAF, no Asio): the
// Redis client and the facade include it. Implemented with the loops
// (loop_scheduler.cpp).



#include <mutex>

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace sluice {

/// Whether a loop's io_context still exists; for what may be destroyed after
/// the loops (an HTTP client dropped late): it posts under `mx` only while
/// `alive`, and the loop clears `alive` under `mx` before it goes.
struct loop_life {
  std::mutex mx;
  bool alive = true;
};

/// The loop the calling thread runs (of any `loop_scheduler`), or null.
boost::asio::io_context* this_thread_loop() noexcept;

/// True on a loop's thread (of any `loop_scheduler`).
bool on_loop_thread() noexcept;

/// A handler of ours on a loop, for its whole run (a local at its top):
/// the actors' jobs it wakes on its own loop run when its outermost turn
/// ends, in the same round of the loop, rather than in a drain posted
/// behind the loop's next poll of its sockets. A connection's request
/// that spawns its governor, an upstream answer that wakes it: each then
/// costs no round of the loop of its own. Nested turns run them at the
/// outermost's end; on another thread, or inside a drain, it does nothing.
class loop_turn {
public:
  loop_turn() noexcept;
  ~loop_turn();
  loop_turn(const loop_turn&) = delete;
  loop_turn& operator=(const loop_turn&) = delete;
};

/// Called by every path that blocks its thread (a `scoped_actor` receive, a
/// Redis command, a thread join): on a loop's thread it would stall every
/// connection and actor of that loop, or deadlock waiting for one of them.
/// On a loop's thread it logs `what` (critical, rate-limited) and, in a
/// debug or sanitizer build (`NDEBUG` unset, or `SLUICE_DEBUG_CHECKS`:
/// every SLUICE_SANITIZE build), aborts. Elsewhere it does nothing.
void assert_not_on_loop(const char* what) noexcept;

/// How many times `assert_not_on_loop` caught a blocking call on a loop.
unsigned long long blocking_calls_on_loops() noexcept;

/// Tests only: whether a caught blocking call aborts a debug build (it
/// does by default); the count and the log line stay.
void abort_on_blocking_loop(bool abort) noexcept;

} // namespace sluice
