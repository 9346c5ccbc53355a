#include "sluice/runtime/redis/client.hpp"

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string_view>

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "sluice/actors/log.hpp"
#include "sluice/actors/system_hold.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

void validate(const redis_config& cfg) {
  auto refuse = [](const std::string& field, const std::string& why) {
    throw field_error(field, why);
  };
  if (cfg.host.empty())
    refuse("address", "needs a host");
  if (cfg.port == 0)
    refuse("address", "needs a port in [1, 65535]");
  if (cfg.connect_timeout <= duration::zero())
    refuse("connect_timeout", "must be positive");
  if (cfg.command_timeout <= duration::zero())
    refuse("command_timeout", "must be positive");
  // 0 would reconnect (and the relay's listener resubscribe) in a loop
  // while Redis refuses connections.
  if (cfg.reconnect_after <= duration::zero())
    refuse("reconnect_after", "must be positive");
}

timeval to_timeval(duration d) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  return timeval{static_cast<time_t>(us / 1000000),
                 static_cast<suseconds_t>(us % 1000000)};
}

std::string random_node_id() {
  std::random_device rd;
  return std::to_string(rd()) + "-" + std::to_string(rd());
}

namespace {

/// Jobs waiting for the worker's connection; beyond, a job fails at once. A
/// healthy Redis answers thousands a second, so a queue this long means it
/// is not healthy. Each entry is three small closures: well under 1 MiB.
constexpr size_t max_queued_jobs = 4096;

/// The least time a command may be given: a socket timeout of zero would
/// mean "wait forever", and less than this cannot be met anyway.
constexpr duration min_command_time = std::chrono::milliseconds{1};

/// The least pause between two PINGs to a Redis that is down, whatever
/// `reconnect_after` says: no busy loop against a refusing port.
constexpr duration min_probe_interval = std::chrono::milliseconds{10};

redis_reply flatten(const redisReply* r) {
  redis_reply out;
  switch (r->type) {
  case REDIS_REPLY_INTEGER:
    out.type = redis_reply::kind::integer;
    out.integer = r->integer;
    break;
  case REDIS_REPLY_STRING:
    out.type = redis_reply::kind::string;
    out.text.assign(r->str, r->len);
    break;
  case REDIS_REPLY_STATUS:
    out.type = redis_reply::kind::status;
    out.text.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ARRAY:
    out.type = redis_reply::kind::array;
    for (size_t i = 0; i < r->elements; ++i)
      out.elements.push_back(flatten(r->element[i]));
    break;
  default:
    break; // nil
  }
  return out;
}

} // namespace

redis_client::redis_client(redis_config cfg)
    : cfg_(std::move(cfg)) {
  validate(cfg_);
}

redis_client::~redis_client() {
  drop();
}

void redis_client::drop() {
  std::lock_guard<std::mutex> guard{ctx_mx_};
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
}

void redis_client::interrupt() {
  std::lock_guard<std::mutex> guard{ctx_mx_};
  interrupted_ = true;
  // Wakes a blocked read; the owner then drops the context.
  if (ctx_ != nullptr)
    ::shutdown(ctx_->fd, SHUT_RDWR);
}

void redis_client::note_fault(result& r) {
  r.fault = true;
  ++faults_;
  last_fault_ = r.error;
}

bool redis_client::ensure_connected(result& r) {
  if (ctx_ != nullptr)
    return true;
  {
    std::lock_guard<std::mutex> guard{ctx_mx_};
    if (interrupted_) {
      r.error = "redis: interrupted";
      return false;
    }
  }
  auto now = steady::now();
  if (connect_failed_at_ && now - *connect_failed_at_ < cfg_.reconnect_after) {
    r.error = "redis unreachable (not retrying yet)";
    note_fault(r);
    return false;
  }
  auto limit = cfg_.connect_timeout;
  if (deadline_) {
    auto left = *deadline_ - now;
    if (left < min_command_time) {
      r.error = "redis: deadline passed before connecting";
      return false;
    }
    limit = std::min(limit, left);
  }
  auto tv = to_timeval(limit);
  auto* ctx = redisConnectWithTimeout(cfg_.host.c_str(), cfg_.port, tv);
  if (ctx == nullptr || ctx->err != 0) {
    r.error = "redis connect to " + cfg_.host + ":" +
              std::to_string(cfg_.port) +
              " failed: " + (ctx ? std::string{ctx->errstr} : "out of memory");
    if (ctx != nullptr)
      redisFree(ctx);
    connect_failed_at_ = now;
    note_fault(r);
    return false;
  }
  {
    std::lock_guard<std::mutex> guard{ctx_mx_};
    if (interrupted_) {
      redisFree(ctx);
      r.error = "redis: interrupted";
      return false;
    }
    ctx_ = ctx;
  }
  auto cmd = to_timeval(cfg_.command_timeout);
  redisSetTimeout(ctx_, cmd);
  applied_timeout_ = cfg_.command_timeout;
  connect_failed_at_.reset();
  shas_.clear(); // a new server may not know our scripts
  if (!cfg_.password.empty()) {
    auto a = run({"AUTH", cfg_.password});
    if (!a.ok()) {
      r.error = "redis AUTH failed: " + a.error;
      drop();
      connect_failed_at_ = now;
      if (!r.fault)
        note_fault(r);
      return false;
    }
  }
  return true;
}

redis_client::result redis_client::run(const std::vector<std::string>& argv) {
  // The socket timeout: the command timeout, or less if the deadline is
  // nearer. No answer within half a command timeout or more is a fault;
  // within less, the caller's deadline was too near to tell.
  auto timeout = cfg_.command_timeout;
  if (deadline_) {
    auto left = *deadline_ - steady::now();
    if (left < min_command_time) {
      result r;
      r.error = "redis: deadline passed before the command was sent";
      return r;
    }
    timeout = std::min(timeout, left);
  }
  bool capped = timeout < cfg_.command_timeout / 2;
  if (timeout != applied_timeout_) {
    redisSetTimeout(ctx_, to_timeval(timeout));
    applied_timeout_ = timeout;
  }
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  errno = 0;
  auto* raw = static_cast<redisReply*>(redisCommandArgv(
      ctx_, static_cast<int>(args.size()), args.data(), lens.data()));
  if (raw == nullptr) {
    // Timeout, closed connection, protocol error: the context is unusable.
    bool timed_out =
        ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    result r;
    r.error =
        std::string{"redis: "} + (ctx_->errstr[0] ? ctx_->errstr : "no answer");
    if (timed_out)
      r.error += " (no answer in time)";
    drop();
    if (!(capped && timed_out))
      note_fault(r);
    return r;
  }
  result r;
  if (raw->type == REDIS_REPLY_ERROR)
    r.error = std::string{raw->str, raw->len};
  else
    r.reply = flatten(raw);
  freeReplyObject(raw);
  return r;
}

redis_client::result
redis_client::command(const std::vector<std::string>& argv) {
  result r;
  if (!ensure_connected(r))
    return r;
  return run(argv);
}

redis_client::result redis_client::eval(const std::string& script,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) {
  result r;
  if (!ensure_connected(r))
    return r;
  auto known = std::find_if(shas_.begin(), shas_.end(),
                            [&](auto& p) { return p.first == script; });
  for (int round = 0; round < 2; ++round) {
    if (known == shas_.end()) {
      auto loaded = run({"SCRIPT", "LOAD", script});
      if (!loaded.ok())
        return loaded;
      shas_.emplace_back(script, loaded.reply->text);
      known = std::prev(shas_.end());
    }
    std::vector<std::string> argv{"EVALSHA", known->second,
                                  std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    r = run(argv);
    if (r.ok() || r.error.compare(0, 8, "NOSCRIPT") != 0)
      return r;
    // The server forgot it (restarted, SCRIPT FLUSH): load it again.
    shas_.erase(known);
    known = shas_.end();
    if (!ensure_connected(r))
      return r;
  }
  return r;
}

redis_client::result redis_client::subscribe(const std::string& channel) {
  auto r = command({"SUBSCRIBE", channel});
  if (r.ok()) {
    redisSetTimeout(ctx_, timeval{0, 0});
    applied_timeout_ = duration::zero();
    // Reads wait without a timeout from now on: keepalive probes find a
    // Redis that vanished without a reset (a failover, a NAT that forgot
    // the connection), so the listener reconnects instead of waiting for
    // ever.
    redisEnableKeepAlive(ctx_);
  }
  return r;
}

std::optional<std::string> redis_client::next_message(size_t max_bytes) {
  while (ctx_ != nullptr) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      drop(); // closed: by Redis, or by `interrupt`
      return std::nullopt;
    }
    auto* r = static_cast<redisReply*>(raw);
    // ["message", channel, payload]; anything else (a subscription's
    // confirmation) is skipped.
    std::optional<std::string> payload;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_STRING &&
        std::string_view{r->element[0]->str, r->element[0]->len} == "message" &&
        r->element[2]->type == REDIS_REPLY_STRING &&
        r->element[2]->len <= max_bytes)
      payload.emplace(r->element[2]->str, r->element[2]->len);
    freeReplyObject(raw);
    if (payload)
      return payload;
  }
  return std::nullopt;
}

// -- redis_worker -------------------------------------------------------------

struct redis_worker::core {
  struct entry {
    steady::time_point deadline;
    job run;
    refusal fail;
  };

  core(redis_config c, std::string w, caf::actor_system* sys)
      : cfg(c)
      , what(std::move(w))
      , client(std::move(c)) {
    if (sys != nullptr)
      hold.emplace(*sys);
  }

  void loop();
  void probe(std::unique_lock<std::mutex>& lk);
  void mark_down(const std::string& why);

  /// First, so released last: after the connection and every job (and the
  /// actor references they hold) are gone.
  std::optional<system_hold> hold;
  redis_config cfg;
  std::string what;
  redis_client client;
  std::mutex mx;
  std::condition_variable cv;
  std::deque<entry> queue;
  bool stop = false;
  std::atomic<bool> is_down{false};
};

redis_worker::redis_worker(redis_config cfg, std::string what,
                           caf::actor_system* sys)
    : core_(std::make_shared<core>(std::move(cfg), std::move(what), sys)) {
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

redis_client& redis_worker::connection() noexcept {
  return core_->client;
}

void redis_worker::submit(steady::time_point deadline, job run, refusal fail) {
  auto& c = *core_;
  std::unique_lock<std::mutex> lk{c.mx};
  if (c.is_down.load(std::memory_order_relaxed)) {
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
  {
    std::lock_guard<std::mutex> guard{mx};
    is_down.store(true, std::memory_order_release);
    dropped.swap(queue);
  }
  static log_limit lim;
  log_limited(lim, spdlog::level::warn,
              "redis {}:{} is down for the {} ({}): calls fail closed until it "
              "answers PING",
              cfg.host, cfg.port, what, why);
  for (auto& e : dropped)
    e.fail(std::string{down_refusal} + ": " + why);
}

// While down: a PING every `reconnect_after`, until one is answered.
void redis_worker::core::probe(std::unique_lock<std::mutex>& lk) {
  auto pause = std::max(cfg.reconnect_after, min_probe_interval);
  if (cv.wait_for(lk, pause, [this] { return stop; }))
    return;
  lk.unlock();
  client.set_deadline(steady::now() + cfg.command_timeout);
  auto r = client.command({"PING"});
  lk.lock();
  if (r.ok() && !stop) {
    is_down.store(false, std::memory_order_release);
    static log_limit lim;
    log_limited(lim, spdlog::level::info,
                "redis {}:{} answers the {} again: calls go on", cfg.host,
                cfg.port, what);
  }
}

void redis_worker::core::loop() {
  std::unique_lock<std::mutex> lk{mx};
  while (!stop) {
    if (is_down.load(std::memory_order_relaxed)) {
      probe(lk);
      continue;
    }
    cv.wait(lk, [this] { return stop || !queue.empty(); });
    if (stop)
      break;
    auto e = std::move(queue.front());
    queue.pop_front();
    lk.unlock();
    auto now = steady::now();
    try {
      if (deadline_passed(e.deadline, now)) {
        // Queued behind a slow Redis: not sent, failed at once.
        e.fail("redis too slow: the call's deadline passed before the "
               "command was sent");
      } else {
        client.set_deadline(std::min(e.deadline, now + cfg.command_timeout));
        auto faults = client.faults();
        e.run(client);
        if (client.faults() != faults)
          mark_down(client.last_fault());
      }
    } catch (...) {
      // A job that throws is dropped; the thread goes on.
    }
    lk.lock();
  }
}

} // namespace sluice
