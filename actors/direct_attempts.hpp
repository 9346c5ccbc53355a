#pragma once

// A built-in source whose attempts a governor starts itself, on the event
// loop the governor runs on, the answer coming straight back to it (SPEC §9:
// a call stays on its loop). The source's actor still owns the source (its
// stats, its I/O, its end); the governor skips only the two messages through
// it per attempt, and the hop to whichever loop the shared actor ran on.

#include <cstdint>
#include <functional>

#include "sluice/messages/call.hpp"

namespace sluice {

class direct_attempts {
public:
  using done_fn = std::function<void(source_reply)>;

  virtual ~direct_attempts() = default;

  /// Starts `req` (its `timeout` set) on the calling thread's loop and
  /// returns the attempt's id (never 0); `done` is called at most once, on
  /// that loop (possibly before `start` returns, when the exchange fails
  /// at once), with the answer (`transient` if the source stops first
  /// while its loop runs). An answer already on its way when the caller
  /// cancels may still come: the caller tells it by its own sequence
  /// number. Returns 0, leaving `req` as it was, when the attempt cannot
  /// run here (not on one of the source's loops, or its I/O cannot be
  /// built): the caller then asks the source's actor. Throws (`req` moved
  /// from, nothing started) only when there is no memory to start it.
  virtual uint64_t start(call_request& req, done_fn done) = 0;

  /// From any thread: attempt `id` is abandoned (its caller timed it out or
  /// terminated); its upstream request is closed, and `done` is not called
  /// after that.
  virtual void cancel(uint64_t id) noexcept = 0;
};

} // namespace sluice
