#include "runtime/redis_client.hpp"

#include <algorithm>
#include <iterator>
#include <random>
#include <stdexcept>

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace sluice {

void validate(const redis_config& cfg) {
  auto refuse = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument(field + ": " + why);
  };
  if (cfg.host.empty())
    refuse("address", "needs a host");
  if (cfg.port == 0)
    refuse("address", "needs a port in [1, 65535]");
  if (cfg.connect_timeout <= duration::zero())
    refuse("connect_timeout", "must be positive");
  if (cfg.command_timeout <= duration::zero())
    refuse("command_timeout", "must be positive");
  if (cfg.reconnect_after < duration::zero())
    refuse("reconnect_after", "must not be negative");
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

redis_client::redis_client(redis_config cfg) : cfg_(std::move(cfg)) {
  validate(cfg_);
}

redis_client::~redis_client() {
  drop();
}

void redis_client::drop() {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
}

bool redis_client::ensure_connected(std::string& error) {
  if (ctx_ != nullptr)
    return true;
  auto now = steady::now();
  if (connect_failed_at_ && now - *connect_failed_at_ < cfg_.reconnect_after) {
    error = "redis unreachable (not retrying yet)";
    return false;
  }
  auto tv = to_timeval(cfg_.connect_timeout);
  ctx_ = redisConnectWithTimeout(cfg_.host.c_str(), cfg_.port, tv);
  if (ctx_ == nullptr || ctx_->err != 0) {
    error = "redis connect to " + cfg_.host + ":" + std::to_string(cfg_.port) +
            " failed: " + (ctx_ ? std::string{ctx_->errstr} : "out of memory");
    drop();
    connect_failed_at_ = now;
    return false;
  }
  auto cmd = to_timeval(cfg_.command_timeout);
  redisSetTimeout(ctx_, cmd);
  connect_failed_at_.reset();
  shas_.clear(); // a new server may not know our scripts
  if (!cfg_.password.empty()) {
    auto r = run({"AUTH", cfg_.password});
    if (!r.ok()) {
      error = "redis AUTH failed: " + r.error;
      drop();
      connect_failed_at_ = now;
      return false;
    }
  }
  return true;
}

redis_client::result redis_client::run(const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* raw = static_cast<redisReply*>(redisCommandArgv(
      ctx_, static_cast<int>(args.size()), args.data(), lens.data()));
  if (raw == nullptr) {
    // Timeout, closed connection, protocol error: the context is unusable.
    result r;
    r.error = std::string{"redis: "} + (ctx_->errstr[0] ? ctx_->errstr
                                                         : "no answer");
    drop();
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
  if (!ensure_connected(r.error))
    return r;
  return run(argv);
}

redis_client::result redis_client::eval(const std::string& script,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) {
  result r;
  if (!ensure_connected(r.error))
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
    if (!ensure_connected(r.error))
      return r;
  }
  return r;
}

} // namespace sluice
