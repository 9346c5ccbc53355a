#pragma once

// An Asio loop on a thread of its own: what each HTTP source runs its
// client on today. The client is handed the loop (Beast's
// `session(net::io_context&)`), not made to own it, so that tests run the
// client on a loop of their own and several clients could share one.

#include <functional>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "sluice/actors/loops/system_hold.hpp"

namespace sluice::upstream {

/// Runs `loop` until it is stopped. An exception out of a handler (one that
/// escaped its own guard) goes to `caught` (with its `what()`, or null for
/// one that is no `std::exception`) and the loop goes on: that handler is
/// lost, never the thread. For every thread of ours that runs a loop.
void run_until_stopped(
    boost::asio::io_context& loop,
    const std::function<void(const char* what)>& caught) noexcept;

class io_thread {
public:
  /// Builds the loop, and Asio's reactor on it (descriptors: better to fail
  /// here, at a source's start, than in a handler at its first call; Asio
  /// builds the reactor on the first socket or timer). Throws when it
  /// cannot. The loop runs once `start` is called. `where` names the loop's
  /// user in the log. From now until it is destroyed, this counts as
  /// running in `sys` (`system_hold`): `sys` is not destroyed under the
  /// thread or under what the loop's handlers hold.
  io_thread(caf::actor_system& sys, std::string where);

  /// Stops the loop and joins the thread first.
  ~io_thread();

  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;

  boost::asio::io_context& loop() noexcept { return ioc_; }

  /// Starts the thread that runs the loop. Throws when no thread can be
  /// started.
  void start();

  /// Whether the caller runs on the loop's thread.
  bool on_thread() const noexcept {
    return std::this_thread::get_id() == thread_.get_id();
  }

  /// Stops the loop and joins its thread: no handler runs afterwards (the
  /// ones still queued are destroyed with the loop, never run). Never from
  /// the loop's own thread, which cannot join itself. Idempotent.
  void stop() noexcept;

private:
  /// The thread. An exception out of `run()` is a handler that escaped its
  /// guard: logged, and the loop goes on serving the others.
  void run() noexcept;

  /// First, so released last: after the thread is joined and the loop, with
  /// every handler and the actor references they hold, is destroyed.
  system_hold hold_;
  std::string where_;
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type>
      work_;
  std::thread thread_;
};

} // namespace sluice::upstream
