#include "sluice/runtime/node/shared_spend.hpp"

#include <future>
#include <set>

#include <unistd.h>

#include "sluice/actors/log.hpp"

namespace sluice::node {

namespace {

log_limit spend_log;

std::vector<std::string> names_of(const std::vector<shared_limit>& limits) {
  std::vector<std::string> out;
  for (auto& l : limits)
    out.push_back(l.name);
  return out;
}

// Unique among the processes and the ledgers of one process.
std::string node_name() {
  static std::atomic<uint64_t> next{0};
  return "n" + std::to_string(::getpid()) + "." + std::to_string(++next) + "." +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

} // namespace

struct shared_spend::core {
  core(redis_config cfg, duration reservation_ttl)
      : worker(for_role(std::move(cfg), "spend"), "spend ledger")
      , limits(worker.connection(), reservation_ttl, node_name())
      , ttl(reservation_ttl) {}

  steady::time_point deadline() const {
    return steady::now() + worker.config().command_timeout;
  }

  // Keeps a settlement Redis did not take, for the next round.
  void keep(std::string id, std::vector<shared_limit> used) {
    std::lock_guard<std::mutex> guard{mx};
    if (unsettled.size() >= max_unsettled) {
      unsettled.pop_front();
      ++counters.settle_dropped;
    }
    unsettled.emplace_back(std::move(id), std::move(used));
  }

  void send_settle(const std::shared_ptr<core>& self, std::string id,
                   std::vector<shared_limit> used);
  void renew_round(const std::shared_ptr<core>& self);

  redis_worker worker;
  /// Used on the worker's thread only.
  shared_limits limits;
  duration ttl;
  stats counters;
  mutable std::mutex mx;
  std::condition_variable cv;
  bool stopping = false;
  /// Reservation -> the names of its limits, while its call runs.
  std::map<std::string, std::vector<std::string>> held;
  std::deque<std::pair<std::string, std::vector<shared_limit>>> unsettled;
};

void shared_spend::core::send_settle(const std::shared_ptr<core>& self,
                                     std::string id,
                                     std::vector<shared_limit> used) {
  std::weak_ptr<core> weak = self;
  auto job = [weak, id, used](redis_client&) {
    auto c = weak.lock();
    if (c && !c->limits.settle(id, used))
      c->keep(id, used);
  };
  worker.submit(deadline(), std::move(job),
                [weak, id, used](const std::string&) {
                  if (auto c = weak.lock())
                    c->keep(id, used);
                });
}

void shared_spend::core::renew_round(const std::shared_ptr<core>& self) {
  using batch = std::vector<shared_limits::held_reservation>;
  std::vector<batch> batches;
  std::deque<std::pair<std::string, std::vector<shared_limit>>> retry;
  {
    std::lock_guard<std::mutex> guard{mx};
    for (auto& [id, names] : held) {
      if (batches.empty() || batches.back().size() == renew_batch)
        batches.emplace_back();
      batches.back().push_back({id, names});
    }
    if (!worker.down())
      retry.swap(unsettled);
  }
  std::weak_ptr<core> weak = self;
  for (auto& b : batches)
    worker.submit(
        deadline(),
        [weak, b = std::move(b)](redis_client&) {
          auto c = weak.lock();
          if (!c)
            return;
          auto lapsed = c->limits.renew(b);
          if (!lapsed || lapsed->empty())
            return;
          c->counters.lapsed += lapsed->size();
          log_limited(spend_log, spdlog::level::warn,
                      "spend ledger: {} reservation(s) of calls still running "
                      "had lapsed in Redis (not renewed within their TTL); "
                      "their calls count when they end",
                      lapsed->size());
        },
        [](const std::string&) {});
  for (auto& [id, used] : retry) {
    ++counters.settle_retries;
    send_settle(self, std::move(id), std::move(used));
  }
}

shared_spend::shared_spend(redis_config cfg, duration reservation_ttl,
                           bool open_when_down)
    : core_(std::make_shared<core>(std::move(cfg), reservation_ttl))
    , open_when_down_(open_when_down) {
  renewer_ = std::thread{[c = core_] {
    std::unique_lock<std::mutex> lk{c->mx};
    while (!c->stopping) {
      c->cv.wait_for(lk, c->ttl / 3);
      if (c->stopping)
        break;
      lk.unlock();
      try {
        c->renew_round(c);
      } catch (...) { // no memory: the next round tries again
      }
      lk.lock();
    }
  }};
}

shared_spend::~shared_spend() {
  {
    std::lock_guard<std::mutex> guard{core_->mx};
    core_->stopping = true;
  }
  core_->cv.notify_all();
  renewer_.join();
  // What the last calls used, and what Redis did not take before, is sent
  // now; the stop waits for it (at most `shutdown_drain`). Reservations of
  // calls still running lapse by their TTL.
  try {
    std::deque<std::pair<std::string, std::vector<shared_limit>>> kept;
    {
      std::lock_guard<std::mutex> guard{core_->mx};
      kept.swap(core_->unsettled);
    }
    if (!core_->worker.down())
      for (auto& [id, used] : kept)
        core_->send_settle(core_, std::move(id), std::move(used));
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    core_->worker.submit(
        steady::now() + shutdown_drain,
        [done](redis_client&) { done->set_value(); },
        [done](const std::string&) { done->set_value(); });
    finished.wait_for(shutdown_drain);
  } catch (...) { // no memory, or a broken promise: the stop goes on
  }
}

void shared_spend::reserve(std::vector<shared_limit> limits,
                           std::function<void(shared_limits::outcome)> done) {
  ++core_->counters.reserves;
  auto answer = std::make_shared<std::function<void(shared_limits::outcome)>>(
      std::move(done));
  auto fail = [weak = std::weak_ptr<core>(core_),
               answer](const std::string& why) {
    if (auto c = weak.lock())
      ++c->counters.errors;
    shared_limits::outcome o;
    o.error = why;
    (*answer)(std::move(o));
  };
  std::weak_ptr<core> weak = core_;
  core_->worker.submit(
      core_->deadline(),
      [weak, answer, fail, limits = std::move(limits)](redis_client&) {
        auto c = weak.lock();
        if (!c)
          return fail("the spend ledger is stopping");
        shared_limits::outcome o;
        try {
          o = c->limits.reserve(limits);
        } catch (const std::exception& e) {
          o.error = e.what();
        }
        if (!o.answered)
          return fail(o.error);
        if (o.ok) {
          std::lock_guard<std::mutex> guard{c->mx};
          c->held.emplace(o.reservation, names_of(limits));
        } else {
          ++c->counters.refusals;
        }
        (*answer)(std::move(o));
      },
      fail);
}

void shared_spend::read(
    std::vector<shared_limit> limits,
    std::function<void(std::optional<std::vector<shared_limits::counts>>)>
        done) {
  using answer_t = std::optional<std::vector<shared_limits::counts>>;
  auto answer =
      std::make_shared<std::function<void(answer_t)>>(std::move(done));
  std::weak_ptr<core> weak = core_;
  core_->worker.submit(
      core_->deadline(),
      [weak, answer, limits = std::move(limits)](redis_client&) {
        answer_t out;
        if (auto c = weak.lock()) {
          try {
            out = c->limits.read_many(limits);
          } catch (...) { // a limit the config should have refused
          }
        }
        (*answer)(std::move(out));
      },
      [answer](const std::string&) { (*answer)(std::nullopt); });
}

void shared_spend::settle(const std::string& reservation,
                          std::vector<shared_limit> used) {
  {
    std::lock_guard<std::mutex> guard{core_->mx};
    core_->held.erase(reservation);
  }
  if (core_->worker.down())
    return core_->keep(reservation, std::move(used));
  core_->send_settle(core_, reservation, std::move(used));
}

const shared_spend::stats& shared_spend::counters() const noexcept {
  return core_->counters;
}

size_t shared_spend::held() const {
  std::lock_guard<std::mutex> guard{core_->mx};
  return core_->held.size();
}

bool shared_spend::down() const noexcept {
  return core_->worker.down();
}

} // namespace sluice::node
