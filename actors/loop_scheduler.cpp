#include "sluice/actors/loop_scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/resumable.hpp>

#include "sluice/actors/io_thread.hpp"
#include "sluice/actors/log.hpp"

namespace sluice {

namespace net = boost::asio;

class loop_scheduler::unit final : public caf::execution_unit {
public:
  unit(caf::actor_system& sys, const loop_scheduler* owner,
       size_t max_throughput)
      : caf::execution_unit(&sys)
      , owner(owner)
      , max_throughput_(max_throughput)
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
          wake = !drain_posted_;
          drain_posted_ = true;
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
    if (wake) {
      try {
        net::post(ioc_, [this] { drain(); });
      } catch (...) {
        std::lock_guard<std::mutex> guard{mx_};
        drain_posted_ = false; // the next job posts again
      }
    }
  }

  void start() {
    thread_ = std::thread{[this] {
      current_ = this;
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
      current_ = nullptr;
    }};
  }

  /// Asks the loop to stop: it first runs the jobs queued by now (as CAF's
  /// own workers do with what was queued before their stop), up to
  /// `stop_rounds` rounds of what those queue in turn, so an actor sent its
  /// exit just before the stop still ends (and its state is freed).
  void request_stop() {
    work_.reset();
    try {
      net::post(ioc_, [this] {
        for (int round = 0; round < stop_rounds; ++round) {
          {
            std::lock_guard<std::mutex> guard{mx_};
            if (jobs_.empty())
              break;
          }
          drain();
        }
        ioc_.stop();
      });
    } catch (...) {
      ioc_.stop(); // no memory for the post: what is queued is released
    }
  }

  /// Joins the loop's thread (after `request_stop`); jobs still queued
  /// stay queued.
  void join() {
    if (thread_.joinable())
      thread_.join();
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

  /// The unit of the calling thread, if it is one of `owner`'s.
  static unit* current(const loop_scheduler* of) noexcept {
    return current_ != nullptr && current_->owner == of ? current_ : nullptr;
  }

  /// The unit of the calling thread, of any loop scheduler.
  static unit* any_current() noexcept { return current_; }

  const loop_scheduler* owner;
  size_t index = 0;

private:
  // Runs what is queued now; jobs queued meanwhile wait for the next drain,
  // so sockets' handlers get their turn between batches.
  void drain() {
    {
      std::lock_guard<std::mutex> guard{mx_};
      batch_.swap(jobs_);
      drain_posted_ = false;
    }
    // `resume` does not throw (CAF handles an actor's exceptions) and the
    // re-queue of `resume_later` does not either (`exec_later`).
    for (auto* job : batch_)
      run(job);
    batch_.clear(); // keeps its capacity: the next swap allocates nothing
  }

  // As CAF's worker does with a job's answer.
  void run(caf::resumable* job) {
    switch (job->resume(this, max_throughput_)) {
      case caf::resumable::resume_later:
        exec_later(job); // keeps its reference
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
      case caf::resumable::shutdown_execution_unit:
        intrusive_ptr_release(job);
        break;
    }
  }

  static thread_local unit* current_;

  size_t max_throughput_;
  // The default concurrency hint, not 1: with 1, a handler posted from the
  // loop's own thread waits in a private queue until the whole running
  // handler (a drain batch) ends, so a post from another thread made later
  // (a cancel) could run before it (the start it cancels). Every post
  // here is FIFO.
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::thread thread_;
  std::mutex mx_;
  std::vector<caf::resumable*> jobs_;
  std::vector<caf::resumable*> batch_;
  bool drain_posted_ = false;
  std::shared_ptr<loop_life> life_ = std::make_shared<loop_life>();
  bool stopped_ = false;
};

thread_local loop_scheduler::unit* loop_scheduler::unit::current_ = nullptr;

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
    : super(sys), loop_count_(std::max<size_t>(loops, 1)) {
  // nop
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
    units_.push_back(std::make_unique<unit>(system(), this, max_throughput_));
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
  stop_actors();
  for (auto& u : units_) // all at once: a job run while stopping may
    u->request_stop();   // wake an actor on another loop
  for (auto& u : units_)
    u->join();
  clock_.cancel_dispatch_loop();
  if (clock_thread_.joinable())
    clock_thread_.join();
  // Jobs still queued (queued late, or by an actor that never stops) are
  // released as CAF does: cleaned up, their state left allocated.
  for (bool any = true; any;) {
    any = false;
    for (auto& u : units_)
      any = u->release_queued() || any;
  }
  closed_ = true; // a job enqueued from here on is released at once
  for (auto& u : units_)
    u->close();
  // The units (and their io_contexts) stay until the destructor: threads
  // CAF has not joined yet (detached actors) may still enqueue meanwhile.
}

void loop_scheduler::enqueue(caf::resumable* job) {
  if (closed_) {
    cleanup_and_release(job);
    return;
  }
  if (auto* u = unit::current(this)) {
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
  auto* u = unit::any_current();
  return u != nullptr ? &u->loop() : nullptr;
}

size_t loop_scheduler::current_index() const noexcept {
  auto* u = unit::current(this);
  return u != nullptr ? u->index : std::numeric_limits<size_t>::max();
}

const std::shared_ptr<loop_life>& loop_scheduler::life(size_t i) const {
  return units_.at(i)->life();
}

loop_scheduler* loop_scheduler::of(caf::actor_system& sys) noexcept {
  return dynamic_cast<loop_scheduler*>(&sys.scheduler());
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

} // namespace sluice
