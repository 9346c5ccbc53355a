#include "runtime/redis_leases.hpp"

#include <stdexcept>

namespace sluice {

namespace {

// Every script starts from the server's clock and drops lapsed leases, so
// no node's clock and no stale lease ever counts.
constexpr const char* acquire_script = R"(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
)";

constexpr const char* renew_script = R"(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local lapsed = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
  else
    table.insert(lapsed, ARGV[i])
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return lapsed
)";

constexpr const char* live_script = R"(
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
)";

} // namespace

lease_pool::lease_pool(redis_client& redis, std::string name, uint32_t cap,
                       duration ttl, std::string node)
    : redis_(redis)
    , key_(redis.key("leases:" + name))
    , cap_(cap)
    , ttl_(ttl)
    , node_(std::move(node)) {
  if (cap_ == 0)
    throw std::invalid_argument("cap: must be positive");
  if (ttl_ < std::chrono::milliseconds{10})
    throw std::invalid_argument("lease_ttl: must be at least 10 ms");
}

lease_pool::outcome lease_pool::try_acquire() {
  outcome out;
  auto id = node_ + ":" + std::to_string(next_++);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl_);
  auto r = redis_.eval(acquire_script, {key_},
                       {std::to_string(cap_), std::to_string(ms.count()), id});
  if (!r.ok() || r.reply->type != redis_reply::kind::integer) {
    out.error = r.ok() ? "unexpected answer" : r.error;
    return out;
  }
  out.answered = true;
  out.granted = r.reply->integer == 1;
  if (out.granted)
    out.lease = std::move(id);
  return out;
}

bool lease_pool::release(const std::string& lease) {
  return redis_.command({"ZREM", key_, lease}).ok();
}

std::optional<std::vector<std::string>>
lease_pool::renew(const std::vector<std::string>& leases) {
  if (leases.empty())
    return std::vector<std::string>{};
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl_);
  std::vector<std::string> args{std::to_string(ms.count())};
  args.insert(args.end(), leases.begin(), leases.end());
  auto r = redis_.eval(renew_script, {key_}, args);
  // An empty Lua table comes back as an empty array.
  if (!r.ok() || r.reply->type != redis_reply::kind::array)
    return std::nullopt;
  std::vector<std::string> lapsed;
  for (auto& e : r.reply->elements)
    lapsed.push_back(e.text);
  return lapsed;
}

int64_t lease_pool::live() {
  auto r = redis_.eval(live_script, {key_}, {});
  if (!r.ok() || r.reply->type != redis_reply::kind::integer)
    return -1;
  return r.reply->integer;
}

} // namespace sluice
