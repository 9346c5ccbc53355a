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
  unit(caf::actor_system& sys, size_t max_throughput)
      : caf::execution_unit(&sys)
      , max_throughput_(max_throughput)
      , work_(net::make_work_guard(ioc_)) {
    // nop
  }

  ~unit() override { release_queued(); }

  net::io_context& loop() noexcept { return ioc_; }

  /// Runs `job` on this loop, later. Jobs wait in the unit's own queue, not
  /// as Asio handlers: at the scheduler's stop they are released while
  /// every loop still exists (`release_queued`). One handler drains the
  /// queue, posted when the queue stops being empty.
  void exec_later(caf::resumable* job) override {
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{mx_};
      if (stopped_) {
        // The loops are gone: as CAF does with a job left at its stop.
        wake = true;
      } else {
        jobs_.push_back(job);
        wake = !drain_posted_;
        drain_posted_ = true;
        job = nullptr;
      }
    }
    if (job != nullptr) {
      caf::scheduler::abstract_coordinator::cleanup_and_release(job);
      return;
    }
    if (wake)
      net::post(ioc_, [this] { drain(); });
  }

  void start() {
    thread_ = std::thread{[this] {
      current_ = this;
      system().thread_started();
      upstream::run_until_stopped(ioc_, [](const char*) {
        // An actor's exception is CAF's to handle inside `resume`; this is
        // a handler of ours that threw: the loop keeps running.
      });
      system().thread_terminates();
      current_ = nullptr;
    }};
  }

  /// Stops the loop and joins its thread; queued jobs stay queued.
  void stop() {
    work_.reset();
    ioc_.stop();
    if (thread_.joinable())
      thread_.join();
  }

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

  static unit* current() noexcept { return current_; }

  size_t index = 0;

private:
  // Runs what is queued now; jobs queued meanwhile wait for the next drain,
  // so sockets' handlers get their turn between batches.
  void drain() {
    std::vector<caf::resumable*> batch;
    {
      std::lock_guard<std::mutex> guard{mx_};
      batch.swap(jobs_);
      drain_posted_ = false;
    }
    for (auto* job : batch)
      run(job);
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
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::thread thread_;
  std::mutex mx_;
  std::vector<caf::resumable*> jobs_;
  bool drain_posted_ = false;
  bool stopped_ = false;
};

thread_local loop_scheduler::unit* loop_scheduler::unit::current_ = nullptr;

loop_scheduler::loop_scheduler(caf::actor_system& sys, size_t loops)
    : super(sys), loop_count_(std::max<size_t>(loops, 1)) {
  // nop
}

loop_scheduler::~loop_scheduler() = default;

void loop_scheduler::init(caf::actor_system_config& cfg) {
  super::init(cfg);
  num_workers_ = loop_count_;
}

void loop_scheduler::start() {
  for (size_t i = 0; i < loop_count_; ++i) {
    units_.push_back(std::make_unique<unit>(system(), max_throughput_));
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
  for (auto& u : units_)
    u->stop();
  clock_.cancel_dispatch_loop();
  if (clock_thread_.joinable())
    clock_thread_.join();
  // Jobs left queued are released while every loop still exists: an
  // actor's cleanup may post to any loop (a client closing its pool).
  for (bool any = true; any;) {
    any = false;
    for (auto& u : units_)
      any = u->release_queued() || any;
  }
  closed_ = true; // a job enqueued from here on is released at once
  for (auto& u : units_)
    u->close();
  units_.clear(); // the loops' own handlers go with their io_contexts
}

void loop_scheduler::enqueue(caf::resumable* job) {
  if (closed_) {
    cleanup_and_release(job);
    return;
  }
  if (auto* u = unit::current()) {
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
  auto* u = unit::current();
  return u != nullptr ? &u->loop() : nullptr;
}

size_t loop_scheduler::current_index() noexcept {
  auto* u = unit::current();
  return u != nullptr ? u->index : std::numeric_limits<size_t>::max();
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
