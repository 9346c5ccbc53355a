#include "sluice/runtime/redis/token_ledger.hpp"

#include <algorithm>

#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/redis/lua.hpp"

namespace sluice {

namespace {

// Drops lapsed reservations and buckets that left the window; leaves
// `inflight`, `used` and `buckets` (index, tokens) for the script after it.
// KEYS: used, held, amounts. ARGV[1..3]: limit, width ms, period ms.
constexpr const char* window_prelude = R"(
local limit = tonumber(ARGV[1])
local width = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(lapsed) do
  local a = redis.call('HGET', KEYS[3], id)
  if a then
    redis.call('HINCRBY', KEYS[3], '#', -tonumber(a))
    redis.call('HDEL', KEYS[3], id)
  end
end
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
local inflight = math.max(0, tonumber(redis.call('HGET', KEYS[3], '#') or '0'))
local used = 0
local buckets = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local idx = tonumber(all[i])
  if (idx + 1) * width + period <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    used = used + tonumber(all[i + 1])
    table.insert(buckets, {idx, tonumber(all[i + 1])})
  end
end
)";

// ARGV[4..6]: tokens, reservation id, TTL ms.
// {1, remaining} granted; {0, remaining, retry ms} refused; {2, remaining}
// too large.
const std::string reserve_script =
    redis_lua::timed((std::string{window_prelude} + R"(
local n = tonumber(ARGV[4])
local ttl = tonumber(ARGV[6])
local free = math.max(0, limit - used - inflight)
if n > limit then
  return {2, free, 0}
end
if used + inflight + n <= limit then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[5])
  redis.call('HSET', KEYS[3], ARGV[5], n)
  redis.call('HINCRBY', KEYS[3], '#', n)
  for k = 1, 3 do
    redis.call('PEXPIRE', KEYS[k], period + width + ttl)
  end
  return {1, limit - used - inflight - n, 0}
end
local retry = 0
if inflight + n <= limit then
  table.sort(buckets, function(a, b) return a[1] < b[1] end)
  local must = used - (limit - inflight - n)
  local gone = 0
  for _, b in ipairs(buckets) do
    gone = gone + b[2]
    if gone >= must then
      retry = (b[1] + 1) * width + period - now
      break
    end
  end
end
return {0, free, retry}
)")
                         .c_str());

// ARGV[4..6]: reservation id, tokens used, TTL ms.
const std::string settle_script =
    redis_lua::timed((std::string{window_prelude} + R"(
local a = redis.call('HGET', KEYS[3], ARGV[4])
if a then
  redis.call('HDEL', KEYS[3], ARGV[4])
  redis.call('HINCRBY', KEYS[3], '#', -tonumber(a))
  redis.call('ZREM', KEYS[2], ARGV[4])
end
local u = tonumber(ARGV[5])
if u > 0 then
  redis.call('HINCRBY', KEYS[1], math.floor(now / width), u)
  redis.call('PEXPIRE', KEYS[1], period + width + tonumber(ARGV[6]))
end
return 1
)")
                         .c_str());

// ARGV[4]: TTL ms; ARGV[5..]: reservations. Returns the lapsed ones.
const std::string renew_script =
    redis_lua::timed((std::string{window_prelude} + R"(
local ttl = tonumber(ARGV[4])
local gone = {}
for i = 5, #ARGV do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[i])
  else
    table.insert(gone, ARGV[i])
  end
end
for k = 2, 3 do
  if redis.call('EXISTS', KEYS[k]) == 1 then
    redis.call('PEXPIRE', KEYS[k], period + width + ttl)
  end
end
return gone
)")
                         .c_str());

const std::string read_script =
    redis_lua::timed((std::string{window_prelude} + R"(
return {used, inflight}
)")
                         .c_str());

bool integers(const redis_client::result& r, size_t n) {
  if (!r.ok() || r.reply->type != redis_reply::kind::array ||
      r.reply->elements.size() < n)
    return false;
  for (size_t i = 0; i < n; ++i)
    if (r.reply->elements[i].type != redis_reply::kind::integer)
      return false;
  return true;
}

uint64_t non_negative(int64_t v) {
  return v < 0 ? 0 : static_cast<uint64_t>(v);
}

} // namespace

token_ledger::token_ledger(redis_client& redis, std::string name,
                           uint64_t limit, duration period,
                           duration reservation_ttl, std::string node)
    : redis_(redis)
    , key_(redis.key("tokens:" + name))
    , limit_(limit)
    , period_ms_(
          std::chrono::duration_cast<std::chrono::milliseconds>(period).count())
    , width_ms_(period_ms_ / policy::token_window_buckets)
    , ttl_ms_(
          std::chrono::duration_cast<std::chrono::milliseconds>(reservation_ttl)
              .count())
    , node_(std::move(node)) {
  if (limit == 0)
    throw field_error("limit", "must be at least 1 token");
  if (limit > max_tokens)
    throw field_error("limit", "must be at most 10^12 tokens");
  if (period < min_period)
    throw field_error("period", "must be at least 60 ms");
  if (reservation_ttl < std::chrono::milliseconds{100})
    throw field_error("reservation_ttl", "must be at least 100 ms");
}

std::vector<std::string> token_ledger::keys() const {
  return {key_ + ":used", key_ + ":held", key_ + ":amounts"};
}

token_ledger::outcome token_ledger::reserve(uint64_t n) {
  outcome out;
  auto id = node_ + ":" + std::to_string(next_++);
  n = std::min(n, limit_ + 1); // beyond the limit: too large, whatever n is
  auto r = redis_.eval(reserve_script, keys(),
                       {std::to_string(limit_), std::to_string(width_ms_),
                        std::to_string(period_ms_), std::to_string(n), id,
                        std::to_string(ttl_ms_)});
  if (!integers(r, 3)) {
    out.error = r.ok() ? "unexpected answer" : r.error;
    return out;
  }
  auto& e = r.reply->elements;
  out.answered = true;
  out.grant.ok = e[0].integer == 1;
  out.grant.too_large = e[0].integer == 2;
  out.grant.remaining = non_negative(e[1].integer);
  out.grant.retry_after = std::chrono::milliseconds{
      std::clamp<int64_t>(e[2].integer, 0, period_ms_ + width_ms_)};
  if (out.grant.ok)
    out.reservation = std::move(id);
  return out;
}

bool token_ledger::settle(const std::string& reservation, uint64_t used) {
  return redis_
      .eval(settle_script, keys(),
            {std::to_string(limit_), std::to_string(width_ms_),
             std::to_string(period_ms_), reservation,
             std::to_string(std::min(used, max_tokens)),
             std::to_string(ttl_ms_)})
      .ok();
}

std::optional<std::vector<std::string>>
token_ledger::renew(const std::vector<std::string>& reservations) {
  if (reservations.empty())
    return std::vector<std::string>{};
  std::vector<std::string> args{
      std::to_string(limit_), std::to_string(width_ms_),
      std::to_string(period_ms_), std::to_string(ttl_ms_)};
  args.insert(args.end(), reservations.begin(), reservations.end());
  auto r = redis_.eval(renew_script, keys(), args);
  if (!r.ok() || r.reply->type != redis_reply::kind::array)
    return std::nullopt;
  std::vector<std::string> lapsed;
  for (auto& e : r.reply->elements)
    lapsed.push_back(e.text);
  return lapsed;
}

std::optional<token_ledger::counts> token_ledger::read() {
  auto r = redis_.eval(read_script, keys(),
                       {std::to_string(limit_), std::to_string(width_ms_),
                        std::to_string(period_ms_)});
  if (!integers(r, 2))
    return std::nullopt;
  return counts{non_negative(r.reply->elements[0].integer),
                non_negative(r.reply->elements[1].integer)};
}

} // namespace sluice
