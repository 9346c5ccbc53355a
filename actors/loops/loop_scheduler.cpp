#include "sluice/actors/loops/loop_scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <stdexcept>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <vector>

#include <boost/asio/detail/concurrency_hint.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/logger.hpp>
#include <caf/resumable.hpp>

#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/log.hpp"

namespace sluice {

namespace net = boost::asio;

namespace {

/// Tells loop schedulers apart (a new one may reuse a destroyed one's
/// address: a thread's stale note must not match it).
std::atomic<uint64_t> scheduler_ids{0};

log_limit stop_log;
log_limit stop_busy_log;

} // namespace

class loop_scheduler::unit final
    : public caf::execution_unit,
      public std::enable_shared_from_this<unit> {
public:
  /// A loop of its own (`external` null: an io_context and a thread of
  /// the unit's own), or a service's io_context, run by the service.
  unit(caf::actor_system& sys, const loop_scheduler* owner, uint64_t owner_id,
       size_t max_throughput, net::io_context* external)
      : caf::execution_unit(&sys)
      , owner(owner)
      , owner_id_(owner_id)
      , max_throughput_(max_throughput)
      , own_(external == nullptr ? std::make_unique<net::io_context>()
                                 : nullptr)
      , ioc_(external != nullptr ? *external : *own_)
      , work_(net::make_work_guard(ioc_)) {
    // nop
  }

  ~unit() override {
    release_queued();
    // Whoever posts to this loop through its life token (an HTTP client
    // dropped late) finds it gone from here on.
    std::lock_guard<std::mutex> guard{life_->mx};
    life_->alive = false;
  }

  net::io_context& loop() noexcept { return ioc_; }

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
      net::post(ioc_, [keep = keep_alive(), this] { enter(); });
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
      net::post(ioc_, [keep = keep_alive(), this] { finish_stop(); });
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
  static net::io_context* any_current_loop() noexcept { return current_.loop; }

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
      net::post(ioc_, [keep = keep_alive(), this] { drain(); });
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
    net::io_context* loop = nullptr;
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
  std::unique_ptr<net::io_context> own_;
  net::io_context& ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
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

thread_local loop_scheduler::unit::thread_note
    loop_scheduler::unit::current_{};
thread_local int loop_scheduler::unit::turn_depth_ = 0;
thread_local loop_scheduler::unit* loop_scheduler::unit::turn_wants_ = nullptr;

// -- loop_clock ---------------------------------------------------------------

// Each actor sets and cancels its own timeouts (in its handlers, then in its
// cleanup), so an actor's note and its cancellation never race; the lock
// only guards the set against other actors.
void loop_clock::note(caf::abstract_actor* self) {
  std::lock_guard<std::mutex> guard{mx_};
  timed_.insert(self);
}

void loop_clock::set_ordinary_timeout(time_point t, caf::abstract_actor* self,
                                      caf::atom_value type, uint64_t id) {
  note(self);
  super::set_ordinary_timeout(t, self, type, id);
}

void loop_clock::set_request_timeout(time_point t, caf::abstract_actor* self,
                                     caf::message_id id) {
  note(self);
  super::set_request_timeout(t, self, id);
}

void loop_clock::set_multi_timeout(time_point t, caf::abstract_actor* self,
                                   caf::atom_value type, uint64_t id) {
  note(self);
  super::set_multi_timeout(t, self, type, id);
}

void loop_clock::cancel_timeouts(caf::abstract_actor* self) {
  {
    std::lock_guard<std::mutex> guard{mx_};
    if (timed_.erase(self) == 0) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return; // it never set one: nothing to cancel
    }
  }
  forwarded_.fetch_add(1, std::memory_order_relaxed);
  super::cancel_timeouts(self);
}

size_t loop_clock::timed_actors() const {
  std::lock_guard<std::mutex> guard{mx_};
  return timed_.size();
}

loop_scheduler::loop_scheduler(caf::actor_system& sys, size_t loops)
    : super(sys)
    , id_(++scheduler_ids)
    , loop_count_(std::max<size_t>(loops, 1)) {
  // nop
}

loop_scheduler::loop_scheduler(caf::actor_system& sys,
                               std::vector<net::io_context*> loops,
                               std::chrono::milliseconds stop_wait)
    : super(sys)
    , id_(++scheduler_ids)
    , loop_count_(loops.size())
    , external_(std::move(loops))
    , stop_wait_(stop_wait) {
  // nop (`use_loop_scheduler` checked the loops)
}

loop_scheduler::~loop_scheduler() {
  units_.clear(); // the loops' own handlers go with their io_contexts
}

void loop_scheduler::init(caf::actor_system_config& cfg) {
  super::init(cfg);
  num_workers_ = loop_count_;
  // CAF's default lets an actor empty its whole mailbox per turn; on a loop
  // a busy shared actor would then hold the thread, and every connection
  // and socket of that loop, for as long as others feed it.
  if (max_throughput_ == std::numeric_limits<size_t>::max())
    max_throughput_ = default_loop_throughput;
}

void loop_scheduler::start() {
  for (size_t i = 0; i < loop_count_; ++i) {
    units_.push_back(std::make_shared<unit>(
        system(), this, id_, max_throughput_,
        external_.empty() ? nullptr : external_[i]));
    units_.back()->index = i;
  }
  for (auto& u : units_)
    u->start();
  clock_thread_ = std::thread{[this] {
    system().thread_started();
    clock_.run_dispatch_loop();
    system().thread_terminates();
  }};
  super::start(); // the utility actors
}

void loop_scheduler::stop() {
  // The stop waits for the loops: not from one of them. Unsupported (with
  // actors awaited, CAF's own wait for them deadlocks before this); if it
  // gets here anyway, this loop's part runs inline below.
  auto* here = unit::current(id_);
  if (here != nullptr)
    assert_not_on_loop("stopping the actor system (destroy it from a thread "
                       "that runs none of its loops)");
  stop_actors();
  for (auto& u : units_) // all at once: a job run while stopping may
    u->request_stop();   // wake an actor on another loop
  if (here != nullptr && here->external())
    here->finish_stop(); // this thread runs it: it cannot wait for itself
  for (auto& u : units_) {
    if (u->join(stop_wait_))
      continue;
    // The service did not run this loop during the stop: what is queued
    // on it is released below without running (an actor sent its exit
    // then ends without its last handlers), and its handlers of ours,
    // should the service run the loop later, find nothing to do.
    log_limited(stop_log, spdlog::level::err,
                "the actor system stopped without event loop {}: the "
                "service did not run it for {} ms; its queued jobs are "
                "released unrun",
                u->index, stop_wait_.count());
  }
  clock_.cancel_dispatch_loop();
  if (clock_thread_.joinable())
    clock_thread_.join();
  // A job enqueued from here on is released at once; jobs still queued
  // (queued late, or by an actor that never stops) are released as CAF
  // does: cleaned up, their state left allocated. Closed first: no job can
  // slip in between the last release and the close.
  closed_ = true;
  for (auto& u : units_)
    u->close();
  for (bool any = true; any;) {
    any = false;
    for (auto& u : units_)
      any = u->release_queued() || any;
  }
  // The units (and their io_contexts) stay until the destructor: threads
  // CAF has not joined yet (detached actors) may still enqueue meanwhile.
}

void loop_scheduler::enqueue(caf::resumable* job) {
  if (closed_) {
    cleanup_and_release(job);
    return;
  }
  if (auto* u = unit::current(id_)) {
    u->exec_later(job);
    return;
  }
  auto i = next_worker_.fetch_add(1, std::memory_order_relaxed);
  units_[i % units_.size()]->exec_later(job);
}

net::io_context& loop_scheduler::loop(size_t i) {
  return units_.at(i)->loop();
}

net::io_context* loop_scheduler::current_loop() noexcept {
  return unit::any_current_loop();
}

size_t loop_scheduler::current_index() const noexcept {
  auto* u = unit::current(id_);
  return u != nullptr ? u->index : std::numeric_limits<size_t>::max();
}

const std::shared_ptr<loop_life>& loop_scheduler::life(size_t i) const {
  return units_.at(i)->life();
}

loop_scheduler* loop_scheduler::of(caf::actor_system& sys) noexcept {
  return dynamic_cast<loop_scheduler*>(&sys.scheduler());
}

loop_turn::loop_turn() noexcept {
  ++loop_scheduler::unit::turn_depth_;
}

loop_turn::~loop_turn() {
  if (--loop_scheduler::unit::turn_depth_ > 0)
    return;
  if (auto* u = std::exchange(loop_scheduler::unit::turn_wants_, nullptr))
    u->run_turn_jobs();
}

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

void use_loop_scheduler(caf::actor_system_config& cfg, size_t loops) {
  cfg.module_factories.push_back(
      [loops](caf::actor_system& sys) -> caf::actor_system::module* {
        return new loop_scheduler(sys, loops);
      });
}

void use_service_loops(caf::actor_system_config& cfg,
                       std::vector<boost::asio::io_context*> loops,
                       std::chrono::milliseconds stop_wait) {
  auto refuse = [](const std::string& why) {
    throw std::invalid_argument("use_service_loops: " + why);
  };
  if (loops.empty())
    refuse("no io_context given");
  for (size_t i = 0; i < loops.size(); ++i) {
    auto n = "io_context " + std::to_string(i);
    if (loops[i] == nullptr)
      refuse(n + " is null");
    for (size_t j = 0; j < i; ++j)
      if (loops[j] == loops[i])
        refuse(n + " is given twice (one io_context is one loop)");
    // With hint 1 (or an unlocked one) a handler posted from the loop's
    // own thread waits in a private queue while one posted later from
    // another thread may run first: an attempt's cancel could overtake its
    // start. The loops rely on posts running in order.
    int hint = net::use_service<net::detail::io_context_impl>(*loops[i])
                   .concurrency_hint();
    if (hint == 1 || !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(SCHEDULER, hint) ||
        !BOOST_ASIO_CONCURRENCY_HINT_IS_LOCKING(REACTOR_IO, hint))
      refuse(n + " was made with concurrency hint " + std::to_string(hint) +
             " (one thread, or no locking): make it with the default hint");
  }
  if (stop_wait.count() < 0)
    refuse("stop_wait is negative");
  cfg.module_factories.push_back(
      [loops = std::move(loops),
       stop_wait](caf::actor_system& sys) -> caf::actor_system::module* {
        return new loop_scheduler(sys, loops, stop_wait);
      });
}

} // namespace sluice
