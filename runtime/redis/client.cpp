#include "sluice/runtime/redis/client.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string_view>

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "sluice/actors/loops/loop_guard.hpp"
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

redis_config for_role(redis_config cfg, const std::string& role) {
  cfg.client_name = "sluice-" + std::to_string(::getpid()) + "-" + role;
  return cfg;
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

redis_client::redis_client(redis_config cfg, std::shared_ptr<redis_clock> clock)
    : cfg_(std::move(cfg))
    , clock_(clock ? std::move(clock) : real_redis_clock())
    , reconnect_pause_(cfg_.reconnect_after) {
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
  auto now = clock_->now();
  if (!reconnect_pause_.may_connect(now)) {
    r.error = "redis unreachable (not retrying yet)";
    note_fault(r);
    return false;
  }
  auto limit = policy::command_time(cfg_.connect_timeout, deadline_, now);
  if (!limit) {
    r.error = "redis: deadline passed before connecting";
    return false;
  }
  auto tv = to_timeval(*limit);
  auto* ctx = redisConnectWithTimeout(cfg_.host.c_str(), cfg_.port, tv);
  if (ctx == nullptr || ctx->err != 0) {
    r.error = "redis connect to " + cfg_.host + ":" +
              std::to_string(cfg_.port) +
              " failed: " + (ctx ? std::string{ctx->errstr} : "out of memory");
    if (ctx != nullptr)
      redisFree(ctx);
    reconnect_pause_.connect_failed(now);
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
  reconnect_pause_.connected();
  shas_.clear(); // a new server may not know our scripts
  if (!cfg_.password.empty()) {
    auto a = run({"AUTH", cfg_.password});
    if (!a.ok()) {
      r.error = "redis AUTH failed: " + a.error;
      drop();
      reconnect_pause_.connect_failed(now);
      if (!r.fault)
        note_fault(r);
      return false;
    }
  }
  // Only a name: a server that refuses it (an old one, an ACL) still
  // serves, and a fault shows at the next command.
  if (!cfg_.client_name.empty()) {
    auto n = run({"CLIENT", "SETNAME", cfg_.client_name});
    if (ctx_ == nullptr) { // the connection failed under it
      r = std::move(n);
      return false;
    }
  }
  return true;
}

redis_client::result redis_client::run(const std::vector<std::string>& argv) {
  assert_not_on_loop("a Redis command (blocking hiredis)");
  // The socket timeout: the command timeout, or less if the deadline is
  // nearer. No answer within half a command timeout or more is a fault;
  // within less, the caller's deadline was too near to tell.
  auto allowed =
      policy::command_time(cfg_.command_timeout, deadline_, clock_->now());
  if (!allowed) {
    result r;
    r.error = "redis: deadline passed before the command was sent";
    return r;
  }
  auto timeout = *allowed;
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
    if (!timed_out ||
        policy::unanswered_is_fault(timeout, cfg_.command_timeout))
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

} // namespace sluice
