#pragma once

// CAF's scheduler replaced by Asio loops (SPEC §9, issue 14): N io_contexts,
// each run by one thread, and an actor runs on the loop it was woken on. A
// Beast handler that sends to an idle actor wakes it on the same loop, so a
// request that stays on its loop crosses no thread at all (CAF_NOTES.md:
// 0.37 µs and no context switch per round trip, against ~24 µs and 2.2
// with CAF's work-sharing scheduler and an I/O thread of our own).
//
// Installed as CAF's scheduler module (`use_loop_scheduler`); an actor
// system without it keeps CAF's own, and tests keep CAF's testing one. The
// loops are the scheduler's own (an io_context and a thread each) or a
// service's io_contexts, each run by one thread of the service.
// Timers stay on CAF's thread-safe clock and its one dispatch thread
// (`loop_clock`: an actor that never set a timeout does not wake it).
//
// What else lives on the loops: sluice-node's HTTP front (each connection on
// one loop) and the HTTP sources' client connections (a keep-alive pool per
// loop, an attempt on the loop its source actor runs it on). Nothing may
// block on a loop: `assert_not_on_loop` guards the blocking paths.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "sluice/actors/loops/loop_guard.hpp"

namespace sluice {

/// A loop's jobs per turn of one actor when `scheduler.max-throughput` is
/// not set (CAF's default, unbounded, would let one busy actor hold a loop).
constexpr size_t default_loop_throughput = 300;

/// On a service's loops: how long the actor system's stop waits for each
/// loop to run its last jobs (`use_service_loops`).
constexpr std::chrono::milliseconds default_loop_stop_wait{10000};

/// CAF's thread-safe clock, except that the end of an actor that never set
/// a timeout costs nothing. CAF cancels every terminating actor's timeouts
/// (`cancel_timeouts`), and the thread-safe clock turns each cancellation
/// into an event for its dispatch thread: one wake-up of that thread, and
/// two context switches, per governor, so per call, although the governor
/// of a unary call to a built-in source sets no timeout at all (a streamed
/// call's TTFT and a service's source's attempt do). This clock remembers which
/// actors set one (ordinary, multi or request timeouts; `delayed_send` is
/// not cancelled by CAF anyway) and forwards only their cancellations.
class loop_clock final : public caf::detail::thread_safe_actor_clock {
public:
  using super = caf::detail::thread_safe_actor_clock;

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self,
                            caf::atom_value type, uint64_t id) override;

  void set_request_timeout(time_point t, caf::abstract_actor* self,
                           caf::message_id id) override;

  void set_multi_timeout(time_point t, caf::abstract_actor* self,
                         caf::atom_value type, uint64_t id) override;

  void cancel_timeouts(caf::abstract_actor* self) override;

  /// Actors that set a timeout and have not terminated yet.
  size_t timed_actors() const;

  /// Terminations passed on to the dispatch thread (actors that had set a
  /// timeout) and terminations that cost nothing.
  uint64_t forwarded_cancellations() const noexcept { return forwarded_; }
  uint64_t skipped_cancellations() const noexcept { return skipped_; }

private:
  void note(caf::abstract_actor* self);

  mutable std::mutex mx_;
  std::unordered_set<const caf::abstract_actor*> timed_;
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> skipped_{0};
};

class loop_scheduler : public caf::scheduler::abstract_coordinator {
public:
  using super = caf::scheduler::abstract_coordinator;

  /// One drain of a loop's actor jobs runs what is queued, then what those
  /// jobs queued in turn, up to this many passes (and `drain_jobs` jobs):
  /// a call's chain of messages takes one round of the loop.
  static constexpr int drain_passes = 8;
  static constexpr size_t drain_jobs = 256;

  /// `loops` loops of its own (at least one).
  loop_scheduler(caf::actor_system& sys, size_t loops);

  /// The service's `loops` (non-null, distinct), each run by one thread of
  /// the service; the stop waits up to `stop_wait` for each.
  loop_scheduler(caf::actor_system& sys,
                 std::vector<boost::asio::io_context*> loops,
                 std::chrono::milliseconds stop_wait);

  ~loop_scheduler() override;

  // -- CAF's module interface -------------------------------------------------

  void init(caf::actor_system_config& cfg) override;

  void start() override;

  void stop() override;

  /// From a loop's thread: runs `job` on that loop; from any other thread:
  /// on the next loop in turn.
  void enqueue(caf::resumable* job) override;

  caf::actor_clock& clock() noexcept override { return clock_; }

  /// The clock, with its counters.
  const loop_clock& timers() const noexcept { return clock_; }

  // -- the loops ---------------------------------------------------------------

  size_t loops() const noexcept { return units_.size(); }

  /// Loop `i`'s io_context, for the sockets that live on it.
  boost::asio::io_context& loop(size_t i);

  /// The loop the calling thread runs (of any loop scheduler), or nothing
  /// for any other thread.
  static boost::asio::io_context* current_loop() noexcept;

  /// The index of the calling thread's loop, if it is one of these (else
  /// SIZE_MAX).
  size_t current_index() const noexcept;

  /// Loop `i`'s life token: posting to it under the token's lock never
  /// reaches a destroyed io_context.
  const std::shared_ptr<loop_life>& life(size_t i) const;

  /// The loop scheduler of `sys`, or null when it runs another scheduler.
  static loop_scheduler* of(caf::actor_system& sys) noexcept;

private:
  class unit;
  /// Runs the jobs a handler's turn queued (its unit's).
  friend class loop_turn;

  /// Unique for the process's life (a thread's note of its loop names it).
  uint64_t id_;
  size_t loop_count_;
  /// A service's loops (empty: the scheduler's own).
  std::vector<boost::asio::io_context*> external_;
  std::chrono::milliseconds stop_wait_ = default_loop_stop_wait;
  /// Shared: a handler on a service's loop keeps its unit (below).
  std::vector<std::shared_ptr<unit>> units_;
  std::atomic<bool> closed_{false};
  loop_clock clock_;
  std::thread clock_thread_;
};

/// Makes the actor system built from `cfg` run its actors on `loops` Asio
/// loops (at least one), each an io_context and a thread of the scheduler.
void use_loop_scheduler(caf::actor_system_config& cfg, size_t loops);

/// Makes the actor system built from `cfg` run its actors on a service's
/// own io_contexts, one loop each. The service's sockets and timers on them
/// share the threads with the actors, and a request that stays on its loop
/// crosses no thread. What the service must do:
///  - Run each io_context on exactly one thread, the same one from the
///    system's start to its stop (the thread that runs a loop is the one
///    that runs the scheduler's handlers; an io_context run by several
///    threads would run an HTTP source's connections of that loop on two
///    at once).
///  - Make each with the default concurrency hint: the loops rely on posts
///    running in order, which hint 1 breaks (refused).
///  - Destroy the actor system from a thread that runs none of the loops,
///    while the service still runs them. The stop waits up to `stop_wait`
///    for each loop to run its last jobs; a loop still busy with a batch
///    of jobs then is waited for until the batch ends; a loop the service
///    did not run has its jobs released unrun (logged). From then on a job
///    for a loop is released, never run on the service's thread.
///  - Destroy the io_contexts only after the system.
/// The scheduler holds work on each io_context while the system lives, and
/// lets go of it at the stop, once the loop ran its last jobs: a service
/// that holds no work of its own then sees `run()` return. CAF 0.17's
/// destructor of the system also waits until no thread holds its logger,
/// and every thread that spawned an actor does until it ends (CAF's
/// `spawn_impl`): a loop's thread lets go at the stop; another thread of
/// the service that made calls must have ended (or called
/// `caf::logger::set_current_actor_system(nullptr)`) first.
/// Throws `std::invalid_argument` for no loop, a null or repeated one, one
/// made with concurrency hint 1, or a negative `stop_wait`.
void use_service_loops(caf::actor_system_config& cfg,
                       std::vector<boost::asio::io_context*> loops,
                       std::chrono::milliseconds stop_wait =
                           default_loop_stop_wait);

} // namespace sluice
