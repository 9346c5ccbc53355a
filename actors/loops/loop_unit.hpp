#pragma once

// One loop of the loop scheduler (`loop_scheduler::unit`): its io_context
// (its own, run on a thread of its own, or a service's), its queue of
// actors' jobs and their drain, its stop. Only loop_scheduler.cpp includes
// this.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/logger.hpp>
#include <caf/resumable.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"

namespace sluice {

class loop_scheduler::unit final
    : public caf::execution_unit,
      public std::enable_shared_from_this<unit> {
public:
  /// A loop of its own (`external` null: an io_context and a thread of
  /// the unit's own), or a service's io_context, run by the service.
  unit(caf::actor_system& sys, const loop_scheduler* owner, uint64_t owner_id,
       size_t max_throughput, boost::asio::io_context* external)
      : caf::execution_unit(&sys)
      , owner(owner)
      , owner_id_(owner_id)
      , max_throughput_(max_throughput)
      , own_(external == nullptr ? std::make_unique<boost::asio::io_context>()
                                 : nullptr)
      , ioc_(external != nullptr ? *external : *own_)
      , work_(boost::asio::make_work_guard(ioc_)) {
    // nop
  }

  ~unit() override {
    release_queued();
    // Whoever posts to this loop through its life token (an HTTP client
    // dropped late) finds it gone from here on.
    std::lock_guard<std::mutex> guard{life_->mx};
    life_->alive = false;
  }

  boost::asio::io_context& loop() noexcept { return ioc_; }

  bool external() const noexcept { return own_ == nullptr; }

  const std::shared_ptr<loop_life>& life() const noexcept { return life_; }

  /// Runs `job` on this loop, later. Jobs wait in the unit's own queue, not
  /// as Asio handlers: at the scheduler's stop they are released while
  /// every loop still exists (`release_queued`). One handler drains the
  /// queue, posted when the queue stops being empty.
  ///
  /// CAF calls this with the job already marked scheduled: it must land in
  /// a queue. Should the queue not grow (no memory), the job is released
  /// as at a stop (that actor ends) rather than left scheduled nowhere;
  /// should the wake-up post fail, the job waits for the next one.
  void exec_later(caf::resumable* job) override {
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{mx_};
      if (!stopped_) {
        try {
          jobs_.push_back(job);
          job = nullptr;
          if (!running_ && turn_depth_ > 0 && current_.u == this &&
              (turn_wants_ == nullptr || turn_wants_ == this)) {
            // A handler of ours runs on this loop: its turn's end runs
            // the drain.
            turn_wants_ = this;
          } else {
            // A running drain takes it in its next pass, or posts the
            // next drain as it ends.
            wake = !drain_posted_ && !running_;
            drain_posted_ = drain_posted_ || wake;
          }
        } catch (...) {
          // released below
        }
      }
    }
    if (job != nullptr) {
      // The loops are stopped (as CAF does with a job left at its stop),
      // or there was no memory to queue it.
      caf::scheduler::abstract_coordinator::cleanup_and_release(job);
      return;
    }
    if (wake)
      post_drain();
  }

  void start() {
    if (external()) {
      // The service's thread that runs the loop learns it is one (the
      // first handler of ours it runs; a service's handler queued before
      // it is not on a loop yet, and its sends take the round robin).
      boost::asio::post(ioc_, [keep = keep_alive(), this] { enter(); });
      return;
    }
    thread_ = std::thread{[this] {
      enter();
      system().thread_started();
      upstream::run_until_stopped(ioc_, [](const char* what) {
        // An actor's exception is CAF's to handle inside `resume`; this is
        // a handler of ours that threw past its own guard: the loop keeps
        // running.
        static log_limit lim;
        log_limited(lim, spdlog::level::err,
                    "an event loop's handler threw: {}",
                    what != nullptr ? what : "an unknown exception");
      });
      system().thread_terminates();
      leave();
    }};
  }

  /// Asks the loop to stop: it first runs the jobs queued by now (as CAF's
  /// own workers do with what was queued before their stop), up to
  /// `stop_rounds` rounds of what those queue in turn, so an actor sent its
  /// exit just before the stop still ends (and its state is freed).
  /// A service's loop is not stopped: it is left (`finish_stop`) and runs
  /// on for the service.
  void request_stop() {
    if (!external())
      work_.reset();
    // A service's loop lets go of its work only once it ran this (else an
    // io_context with no other work would stop before running it).
    try {
      boost::asio::post(ioc_, [keep = keep_alive(), this] { finish_stop(); });
    } catch (...) {
      // No memory for the post: what is queued is released.
      if (external())
        set_stopped();
      else
        ioc_.stop();
    }
  }

  /// On the loop (or on the service's thread that stops the system while it
  /// runs this loop): the last rounds of jobs, then the loop is left.
  void finish_stop() {
    for (int round = 0; round < stop_rounds; ++round) {
      {
        std::lock_guard<std::mutex> guard{mx_};
        if (jobs_.empty())
          break;
      }
      drain();
    }
    if (!external()) {
      ioc_.stop();
      return;
    }
    if (current_.u == this)
      leave();
    // A spawn leaves its thread holding the system's logger (CAF 0.17's
    // `spawn_impl`), and the system's destructor waits until every such
    // hold is gone: a thread of ours drops it as it ends; the service's
    // thread runs on, so it drops it here.
    caf::logger::set_current_actor_system(nullptr);
    set_stopped();
  }

  /// Joins the loop's thread (after `request_stop`); jobs still queued
  /// stay queued. A service's loop: waits up to `wait` until the loop ran
  /// `finish_stop`; false if it did not. Then no job runs there any more:
  /// one still running (a handler slower than `wait`) is waited for
  /// without a limit -- the system must outlive it -- and later ones are
  /// left for `release_queued`.
  bool join(std::chrono::milliseconds wait) {
    if (thread_.joinable())
      thread_.join();
    if (!external())
      return true;
    std::unique_lock<std::mutex> guard{mx_};
    if (stopped_cv_.wait_for(guard, wait, [this] { return left_; }))
      return true;
    stopped_ = true; // drains from here on run nothing; new jobs are released
    if (running_) {
      static log_limit stop_busy_log;
      log_limited(stop_busy_log, spdlog::level::warn,
                  "event loop {} still runs a batch of actors' jobs after "
                  "{} ms of the actor system's stop; waiting for it",
                  index, wait.count());
      stopped_cv_.wait(guard, [this] { return !running_; });
    }
    release_work();
    return false;
  }

  /// Rounds of queued jobs a stopping loop still runs.
  static constexpr int stop_rounds = 16;

  /// After every loop stopped: releases the queued jobs (CAF's cleanup of
  /// each); true if there were any. Releasing one may queue others (a
  /// monitor's down message), so the scheduler repeats until none is left.
  bool release_queued() noexcept {
    std::vector<caf::resumable*> jobs;
    {
      std::lock_guard<std::mutex> guard{mx_};
      jobs.swap(jobs_);
    }
    for (auto* job : jobs)
      caf::scheduler::abstract_coordinator::cleanup_and_release(job);
    return !jobs.empty();
  }

  /// From here on a job enqueued here is released at once.
  void close() noexcept {
    std::lock_guard<std::mutex> guard{mx_};
    stopped_ = true;
  }

  /// The unit of the calling thread, if it is one of the scheduler's with
  /// id `owner_id`.
  static unit* current(uint64_t owner_id) noexcept {
    return current_.u != nullptr && current_.owner_id == owner_id
               ? current_.u
               : nullptr;
  }

  /// The loop of the calling thread, of any loop scheduler.
  static boost::asio::io_context* any_current_loop() noexcept { return current_.loop; }

  const loop_scheduler* owner;
  size_t index = 0;

  /// At the end of a handler's `loop_turn`: the jobs it queued here.
  void run_turn_jobs() noexcept { drain(false); }

private:
  // Runs what is queued now, then what those jobs queued in turn (a
  // governor's messages to the actors of its call), pass after pass, up to
  // `loop_scheduler::drain_passes` passes and `drain_jobs` jobs: a call's
  // chain of messages runs in one round of the loop, and sockets' handlers
  // still get their turn between drains. What is left is the next drain's,
  // posted as this one ends. Nothing once the loop is stopped or left, nor
  // inside a drain. `posted`: run by the drain handler posted for it (else
  // at a handler's turn end: a posted one may still come, and finds what is
  // left).
  void drain(bool posted = true) {
    {
      std::lock_guard<std::mutex> guard{mx_};
      if (posted)
        drain_posted_ = false;
      if (stopped_ || running_)
        return;
      batch_.swap(jobs_);
      running_ = true;
    }
    // The thread that runs a service's loop now (should the service have
    // moved it to another).
    if (external())
      enter();
    size_t ran = 0;
    bool wake = false;
    for (int pass = 1;; ++pass) {
      // `resume` does not throw (CAF handles an actor's exceptions) and the
      // re-queue of `resume_later` does not either (`exec_later`).
      for (auto* job : batch_)
        run(job);
      ran += batch_.size();
      batch_.clear(); // keeps its capacity: the next swap allocates nothing
      std::lock_guard<std::mutex> guard{mx_};
      if (!stopped_ && !jobs_.empty() && pass < loop_scheduler::drain_passes &&
          ran < loop_scheduler::drain_jobs) {
        batch_.swap(jobs_);
        continue;
      }
      running_ = false;
      wake = !stopped_ && !jobs_.empty() && !drain_posted_;
      drain_posted_ = drain_posted_ || wake;
      break;
    }
    stopped_cv_.notify_all();
    // Queued again now that the drain is over: a drain is posted for them
    // (or they are released, the loop stopped).
    for (auto* job : yielded_)
      exec_later(job);
    yielded_.clear();
    if (wake)
      post_drain();
  }

  // Posts the drain its caller marked posted (`drain_posted_`); should the
  // post fail (no memory), the next job posts again.
  void post_drain() noexcept {
    try {
      boost::asio::post(ioc_, [keep = keep_alive(), this] { drain(); });
    } catch (...) {
      std::lock_guard<std::mutex> guard{mx_};
      drain_posted_ = false;
    }
  }

  // As CAF's worker does with a job's answer.
  void run(caf::resumable* job) {
    switch (job->resume(this, max_throughput_)) {
      case caf::resumable::resume_later:
        // It used its share of messages: it waits for the next drain,
        // behind the sockets' handlers, not for this drain's next pass.
        try {
          yielded_.push_back(job); // keeps its reference
        } catch (...) {
          exec_later(job); // no memory: the next pass takes it
        }
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
      case caf::resumable::shutdown_execution_unit:
        intrusive_ptr_release(job);
        break;
    }
  }

  /// What a loop's thread knows of its loop. Compared by the scheduler's
  /// id, never read through the pointer of another scheduler's unit: a
  /// service's thread keeps its note should the service stop running the
  /// loop before the scheduler's stop reached it.
  struct thread_note {
    uint64_t owner_id = 0;
    class unit* u = nullptr;
    boost::asio::io_context* loop = nullptr;
  };

  void enter() noexcept { current_ = {owner_id_, this, &ioc_}; }

  static void leave() noexcept { current_ = {}; }

  // A service's loop is left: jobs that reach it from here on are released
  // at once (as after the stop), not run on the service's thread.
  void set_stopped() {
    {
      std::lock_guard<std::mutex> guard{mx_};
      left_ = true;
      stopped_ = true;
    }
    release_work();
    stopped_cv_.notify_all();
  }

  /// Lets the service's io_context go: with no other work, its `run()`
  /// returns. Once (from the loop or from the stopping thread).
  void release_work() {
    std::lock_guard<std::mutex> guard{work_mx_};
    work_.reset();
  }

  /// What a handler posted to a service's loop holds: the unit outlives it
  /// there (the loop may run it after the scheduler is gone). A unit's own
  /// loop goes with the unit: its handlers hold nothing (they would hold
  /// the unit through its own io_context).
  std::shared_ptr<unit> keep_alive() {
    return external() ? shared_from_this() : nullptr;
  }

  static thread_local thread_note current_;

public:
  /// Handlers of ours running on this thread (`loop_turn`), and the unit
  /// whose jobs the outermost one runs as it ends.
  static thread_local int turn_depth_;
  static thread_local unit* turn_wants_;

private:

  uint64_t owner_id_;

  size_t max_throughput_;
  // The default concurrency hint, not 1: with 1, a handler posted from the
  // loop's own thread waits in a private queue until the whole running
  // handler (a drain batch) ends, so a post from another thread made later
  // (a cancel) could run before it (the start it cancels). Every post
  // here is FIFO.
  std::unique_ptr<boost::asio::io_context> own_;
  boost::asio::io_context& ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
  std::mutex mx_;
  std::vector<caf::resumable*> jobs_;
  std::vector<caf::resumable*> batch_;
  /// Jobs of the running drain that used their share (`run`).
  std::vector<caf::resumable*> yielded_;
  bool drain_posted_ = false;
  std::shared_ptr<loop_life> life_ = std::make_shared<loop_life>();
  bool stopped_ = false;
  /// A service's loop ran `finish_stop` (under `mx_`).
  bool left_ = false;
  /// A drain is running its batch (under `mx_`).
  bool running_ = false;
  std::mutex work_mx_;
  std::condition_variable stopped_cv_;
};

} // namespace sluice
