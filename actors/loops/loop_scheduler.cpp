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
#include "sluice/actors/loops/loop_unit.hpp"
#include "sluice/actors/log.hpp"

namespace sluice {

namespace net = boost::asio;

namespace {

/// Tells loop schedulers apart (a new one may reuse a destroyed one's
/// address: a thread's stale note must not match it).
std::atomic<uint64_t> scheduler_ids{0};

log_limit stop_log;

} // namespace

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
