#include "sluice/runtime/redis/client.hpp"

// `redis_worker`: one Redis connection on a thread of its own, with
// fail-fast while Redis is down (declared in client.hpp beside the client
// it drives).

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/system_hold.hpp"

namespace sluice {

namespace {

/// Jobs waiting for the worker's connection; beyond, a job fails at once. A
/// healthy Redis answers thousands a second, so a queue this long means it
/// is not healthy. Each entry is three small closures: well under 1 MiB.
constexpr size_t max_queued_jobs = 4096;

} // namespace

// -- redis_worker -------------------------------------------------------------

struct redis_worker::core {
  struct entry {
    time_point deadline;
    job run;
    refusal fail;
  };

  core(redis_config c, std::string w, caf::actor_system* sys,
       std::shared_ptr<redis_clock> clk)
      : cfg(c)
      , what(std::move(w))
      , clock(clk ? std::move(clk) : real_redis_clock())
      , client(std::move(c), clock)
      , health(cfg.command_timeout, cfg.reconnect_after) {
    if (sys != nullptr)
      hold.emplace(*sys);
  }

  void loop();
  void run_next(std::unique_lock<std::mutex>& lk);
  void probe(std::unique_lock<std::mutex>& lk);
  void mark_down(const std::string& why);

  /// First, so released last: after the connection and every job (and the
  /// actor references they hold) are gone.
  std::optional<system_hold> hold;
  redis_config cfg;
  std::string what;
  std::shared_ptr<redis_clock> clock;
  redis_client client;
  std::mutex mx;
  std::condition_variable cv;
  std::deque<entry> queue;
  bool stop = false;
  /// Under `mx`; `is_down` mirrors its `down()` for `redis_worker::down`,
  /// which takes no lock.
  policy::redis_health health;
  std::atomic<bool> is_down{false};
};

redis_worker::redis_worker(redis_config cfg, std::string what,
                           caf::actor_system* sys,
                           std::shared_ptr<redis_clock> clock)
    : core_(std::make_shared<core>(std::move(cfg), std::move(what), sys,
                                   std::move(clock))) {
  thread_ = std::thread{[c = core_] { c->loop(); }};
}

redis_worker::~redis_worker() {
  {
    std::lock_guard<std::mutex> guard{core_->mx};
    core_->stop = true;
  }
  core_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach(); // never join ourselves; the thread holds `core_`
  else if (thread_.joinable())
    thread_.join();
}

bool redis_worker::down() const noexcept {
  return core_->is_down.load(std::memory_order_acquire);
}

const redis_config& redis_worker::config() const noexcept {
  return core_->cfg;
}

redis_clock& redis_worker::clock() const noexcept {
  return *core_->clock;
}

redis_client& redis_worker::connection() noexcept {
  return core_->client;
}

void redis_worker::submit(time_point deadline, job run, refusal fail) {
  // Held to the end: once the job is queued, the worker may run it and a
  // job may destroy the worker (its answer drops the owner's last
  // reference) before this call has notified.
  auto core = core_;
  auto& c = *core;
  std::unique_lock<std::mutex> lk{c.mx};
  if (c.health.down()) {
    lk.unlock();
    fail(std::string{down_refusal} +
         " (failing closed until it answers again)");
    return;
  }
  if (c.queue.size() >= max_queued_jobs) {
    lk.unlock();
    fail("redis too slow (" + std::to_string(max_queued_jobs) +
         " commands queued)");
    return;
  }
  c.queue.push_back(core::entry{deadline, std::move(run), std::move(fail)});
  lk.unlock();
  c.cv.notify_one();
}

void redis_worker::core::mark_down(const std::string& why) {
  std::deque<entry> dropped;
  bool fell;
  {
    std::lock_guard<std::mutex> guard{mx};
    fell = health.fault(clock->now());
    is_down.store(true, std::memory_order_release);
    dropped.swap(queue);
  }
  if (fell) {
    try {
      static log_limit lim;
      log_limited(lim, spdlog::level::warn,
                  "redis {}:{} is down for the {} ({}): calls fail closed "
                  "until it answers PING",
                  cfg.host, cfg.port, what, why);
    } catch (...) {
      // The refusals below must happen all the same.
    }
  }
  // One by one: a refusal that throws must not cost the others theirs.
  for (auto& e : dropped) {
    try {
      e.fail(std::string{down_refusal} + ": " + why);
    } catch (...) {
    }
  }
}

// While down: a PING each time one is due, until one is answered.
void redis_worker::core::probe(std::unique_lock<std::mutex>& lk) {
  if (clock->wait_until(lk, cv, health.probe_due(), [this] { return stop; }))
    return;
  if (!health.probe_due(clock->now()))
    return; // woken early (a spurious wake-up): wait again
  lk.unlock();
  bool answered = false;
  try {
    client.set_deadline(health.probe_deadline(clock->now()));
    answered = client.command({"PING"}).ok();
  } catch (...) {
    // Counted as unanswered: the next PING waits a full interval.
  }
  auto now = clock->now();
  lk.lock();
  if (answered && !stop) {
    health.probe_answered();
    is_down.store(false, std::memory_order_release);
    static log_limit lim;
    log_limited(lim, spdlog::level::info,
                "redis {}:{} answers the {} again: calls go on", cfg.host,
                cfg.port, what);
  } else {
    health.probe_failed(now);
  }
}

void redis_worker::core::run_next(std::unique_lock<std::mutex>& lk) {
  cv.wait(lk, [this] { return stop || !queue.empty(); });
  if (stop)
    return;
  auto e = std::move(queue.front());
  queue.pop_front();
  lk.unlock();
  auto now = clock->now();
  if (policy::redis_health::stale(e.deadline, now)) {
    // Queued behind a slow Redis: not sent, failed at once.
    e.fail("redis too slow: the call's deadline passed before the "
           "command was sent");
  } else {
    client.set_deadline(health.job_deadline(e.deadline, now));
    auto faults = client.faults();
    try {
      e.run(client);
    } catch (...) {
      // A job that throws is dropped; a fault it met still counts.
    }
    if (client.faults() != faults)
      mark_down(client.last_fault());
  }
  // `e` (and what its closures hold) goes before the lock is taken again.
}

void redis_worker::core::loop() {
  std::unique_lock<std::mutex> lk{mx, std::defer_lock};
  for (;;) {
    try {
      if (!lk.owns_lock())
        lk.lock();
      if (stop)
        break;
      if (health.down())
        probe(lk);
      else
        run_next(lk);
    } catch (...) {
      // Nothing may escape the thread (std::terminate): what threw -- a
      // refusal, the log, the clock -- is dropped, and the loop goes on.
    }
  }
}

} // namespace sluice
