#include "sluice/runtime/redis/shared_limits.hpp"

#include <algorithm>
#include <map>

#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/redis/lua.hpp"

namespace sluice {

namespace {

using std::chrono::milliseconds;

// `state(i)`: the i-th limit (KEYS[3i-2..3i]: used, held, amounts; ARGV from
// 3 + 4(i-1): kind 'w'/'d'/'m', limit, period ms, amount), its lapsed
// reservations dropped and, for a window, the buckets that left it; for a
// budget, the other periods. ARGV[1]: the reservation TTL in ms.
constexpr const char* limits_prelude = R"(
local ttl = tonumber(ARGV[1])
local function month_of(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) +
    math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  return y * 12 + m - 1
end
-- Takes reservation `id` (amount `x`, as stored) out of `amt_k`'s sum:
-- "-0" is no integer to Redis, so a zero amount subtracts nothing.
local function give_back(amt_k, id, x)
  redis.call('HDEL', amt_k, id)
  if x ~= '0' then
    redis.call('HINCRBY', amt_k, '#', '-' .. x)
  end
end
local function state(i)
  local a = 2 + 4 * (i - 1)
  local s = {used_k = KEYS[3 * i - 2], held_k = KEYS[3 * i - 1],
             amt_k = KEYS[3 * i], kind = ARGV[a + 1],
             limit = tonumber(ARGV[a + 2]), period = tonumber(ARGV[a + 3]),
             amount = ARGV[a + 4], used = 0, buckets = {}, last = -1}
  local lapsed = redis.call('ZRANGEBYSCORE', s.held_k, '-inf', now)
  for _, id in ipairs(lapsed) do
    local x = redis.call('HGET', s.amt_k, id)
    if x then
      give_back(s.amt_k, id, x)
    end
  end
  if #lapsed > 0 then
    redis.call('ZREMRANGEBYSCORE', s.held_k, '-inf', now)
  end
  s.inflight = math.max(0, tonumber(redis.call('HGET', s.amt_k, '#') or '0'))
  local all = redis.call('HGETALL', s.used_k)
  if s.kind == 'w' then
    s.width = math.floor(s.period / 60)
    s.index = math.floor(now / s.width)
    s.keep = s.period + s.width + ttl
    for k = 1, #all, 2 do
      local idx = tonumber(all[k])
      if (idx + 1) * s.width + s.period <= now then
        redis.call('HDEL', s.used_k, all[k])
      else
        s.used = s.used + tonumber(all[k + 1])
        table.insert(s.buckets, {idx, tonumber(all[k + 1])})
        s.last = math.max(s.last, idx)
      end
    end
  else
    local days = math.floor(now / 86400000)
    s.index = s.kind == 'd' and days or month_of(days)
    s.keep = 32 * 86400000 + ttl
    for k = 1, #all, 2 do
      if tonumber(all[k]) ~= s.index then
        redis.call('HDEL', s.used_k, all[k])
      else
        s.used = tonumber(all[k + 1])
      end
    end
  end
  return s
end
local n = #KEYS / 3
)";

// ARGV[2]: the reservation id. {ok, refused index, too large, retry ms,
// then per limit: remaining, reset ms}.
const std::string reserve_script =
    redis_lua::timed((std::string{limits_prelude} + R"(
local states = {}
local out = {1, 0, 0, 0}
for i = 1, n do
  local s = state(i)
  states[i] = s
  local amount = tonumber(s.amount)
  local free = math.max(0, s.limit - s.used - s.inflight)
  local reset = 0
  if s.last >= 0 then
    reset = (s.last + 1) * s.width + s.period - now
  end
  if out[1] == 1 and s.used + s.inflight + amount > s.limit then
    out[1] = 0
    out[2] = i
    if amount > s.limit then
      out[3] = 1
    elseif s.kind == 'w' and s.inflight + amount <= s.limit then
      table.sort(s.buckets, function(x, y) return x[1] < y[1] end)
      local must = s.used - (s.limit - s.inflight - amount)
      local gone = 0
      for _, b in ipairs(s.buckets) do
        gone = gone + b[2]
        if gone >= must then
          out[4] = (b[1] + 1) * s.width + s.period - now
          break
        end
      end
    end
  end
  s.free = free
  table.insert(out, free)
  table.insert(out, reset)
end
if out[1] == 0 then
  return out
end
for i, s in ipairs(states) do
  redis.call('ZADD', s.held_k, now + ttl, ARGV[2])
  redis.call('HSET', s.amt_k, ARGV[2], s.amount)
  redis.call('HINCRBY', s.amt_k, '#', s.amount)
  for _, k in ipairs({s.used_k, s.held_k, s.amt_k}) do
    if redis.call('PTTL', k) < s.keep then
      redis.call('PEXPIRE', k, s.keep)
    end
  end
  out[3 + 2 * i] = s.free - tonumber(s.amount)
end
return out
)")
                         .c_str());

// ARGV[2]: the reservation id; each limit's amount: what was used (at most
// its limit). A full limit counts no more (its counter stays bounded).
const std::string settle_script =
    redis_lua::timed((std::string{limits_prelude} + R"(
for i = 1, n do
  local s = state(i)
  local x = redis.call('HGET', s.amt_k, ARGV[2])
  if x then
    redis.call('ZREM', s.held_k, ARGV[2])
    give_back(s.amt_k, ARGV[2], x)
  end
  if tonumber(s.amount) > 0 and s.used < s.limit then
    redis.call('HINCRBY', s.used_k, s.index, s.amount)
    if redis.call('PTTL', s.used_k) < s.keep then
      redis.call('PEXPIRE', s.used_k, s.keep)
    end
  end
end
return 1
)")
                         .c_str());

// KEYS: held, amounts per limit; ARGV[2..]: per reservation its id, the
// number of its limits and their indexes (i: KEYS[2i-1], KEYS[2i]).
// Returns those held in none of their limits.
const std::string renew_script = redis_lua::timed(R"(
local ttl = tonumber(ARGV[1])
local gone = {}
local j = 2
while j <= #ARGV do
  local id = ARGV[j]
  local count = tonumber(ARGV[j + 1])
  local found = false
  for c = 1, count do
    local held = KEYS[2 * tonumber(ARGV[j + 1 + c]) - 1]
    if redis.call('ZSCORE', held, id) then
      redis.call('ZADD', held, 'XX', now + ttl, id)
      found = true
    end
  end
  if not found then
    table.insert(gone, id)
  end
  j = j + 2 + count
end
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) > 0 and redis.call('PTTL', k) < ttl + 60000 then
    redis.call('PEXPIRE', k, ttl + 60000)
  end
end
return gone
)");

// {used, in flight} per limit.
const std::string read_script =
    redis_lua::timed((std::string{limits_prelude} + R"(
local out = {}
for i = 1, n do
  local s = state(i)
  table.insert(out, s.used)
  table.insert(out, s.inflight)
end
return out
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

int64_t ms(duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

} // namespace

shared_limits::shared_limits(redis_client& redis, duration reservation_ttl,
                             std::string node)
    : redis_(redis)
    , ttl_(reservation_ttl)
    , node_(std::move(node)) {
  if (reservation_ttl < milliseconds{100})
    throw field_error("reservation_ttl", "must be at least 100 ms");
}

std::vector<std::string>
shared_limits::keys(const std::vector<shared_limit>& limits) const {
  std::vector<std::string> out;
  for (auto& l : limits) {
    auto base = redis_.key("spend:" + l.name);
    out.push_back(base + ":used");
    out.push_back(base + ":held");
    out.push_back(base + ":amounts");
  }
  return out;
}

std::vector<std::string> shared_limits::shape(const shared_limit& l) const {
  if (l.limit == 0 || l.limit > max_amount)
    throw field_error("limits", l.name + ": the limit must be in [1, 10^18]");
  if (l.type == shared_limit::kind::window && l.period < min_period)
    throw field_error("limits", l.name + ": a window must be at least 60 ms");
  const char* kind = l.type == shared_limit::kind::window ? "w"
                     : l.type == shared_limit::kind::day  ? "d"
                                                          : "m";
  return {kind, std::to_string(l.limit), std::to_string(ms(l.period)),
          std::to_string(std::min(l.amount, max_amount))};
}

shared_limits::outcome
shared_limits::reserve(const std::vector<shared_limit>& limits) {
  outcome out;
  auto id = node_ + ":" + std::to_string(next_++);
  std::vector<std::string> args{std::to_string(ms(ttl_)), id};
  for (auto& l : limits) {
    auto a = shape(l);
    // Beyond the limit is too large, whatever the amount.
    a[3] = std::to_string(std::min(l.amount, l.limit + 1));
    args.insert(args.end(), a.begin(), a.end());
  }
  auto r = redis_.eval(reserve_script, keys(limits), args);
  if (!integers(r, 4 + 2 * limits.size())) {
    out.error = r.ok() ? "unexpected answer" : r.error;
    return out;
  }
  auto& e = r.reply->elements;
  out.answered = true;
  out.ok = e[0].integer == 1;
  out.refused = e[1].integer > 0 ? static_cast<size_t>(e[1].integer - 1) : 0;
  out.too_large = e[2].integer == 1;
  int64_t longest = 0;
  for (auto& l : limits)
    if (l.type == shared_limit::kind::window)
      longest = std::max(longest, ms(l.period) + ms(l.period) / 60);
  out.retry_after = milliseconds{std::clamp<int64_t>(e[3].integer, 0, longest)};
  for (size_t i = 0; i < limits.size(); ++i) {
    out.remaining.push_back(non_negative(e[4 + 2 * i].integer));
    out.reset_after.push_back(
        milliseconds{std::clamp<int64_t>(e[5 + 2 * i].integer, 0, longest)});
  }
  if (out.ok)
    out.reservation = std::move(id);
  return out;
}

bool shared_limits::settle(const std::string& reservation,
                           const std::vector<shared_limit>& used) {
  std::vector<std::string> args{std::to_string(ms(ttl_)), reservation};
  for (auto& l : used) {
    auto a = shape(l);
    a[3] = std::to_string(std::min(l.amount, l.limit));
    args.insert(args.end(), a.begin(), a.end());
  }
  return redis_.eval(settle_script, keys(used), args).ok();
}

std::optional<std::vector<std::string>>
shared_limits::renew(const std::vector<held_reservation>& reservations) {
  if (reservations.empty())
    return std::vector<std::string>{};
  std::vector<std::string> k;
  std::map<std::string, size_t> index; // name -> its place in KEYS, from 1
  std::vector<std::string> args{std::to_string(ms(ttl_))};
  for (auto& r : reservations) {
    args.push_back(r.id);
    args.push_back(std::to_string(r.names.size()));
    for (auto& name : r.names) {
      auto [at, added] = index.emplace(name, index.size() + 1);
      if (added) {
        auto base = redis_.key("spend:" + name);
        k.push_back(base + ":held");
        k.push_back(base + ":amounts");
      }
      args.push_back(std::to_string(at->second));
    }
  }
  auto r = redis_.eval(renew_script, k, args);
  if (!r.ok() || r.reply->type != redis_reply::kind::array)
    return std::nullopt;
  std::vector<std::string> lapsed;
  for (auto& e : r.reply->elements)
    lapsed.push_back(e.text);
  return lapsed;
}

std::optional<shared_limits::counts>
shared_limits::read(const shared_limit& limit) {
  auto all = read_many({limit});
  if (!all)
    return std::nullopt;
  return all->front();
}

std::optional<std::vector<shared_limits::counts>>
shared_limits::read_many(const std::vector<shared_limit>& limits) {
  if (limits.empty())
    return std::vector<counts>{};
  std::vector<std::string> args{std::to_string(ms(ttl_)), ""};
  for (auto& l : limits) {
    auto a = shape(l);
    args.insert(args.end(), a.begin(), a.end());
  }
  auto r = redis_.eval(read_script, keys(limits), args);
  if (!integers(r, 2 * limits.size()))
    return std::nullopt;
  std::vector<counts> out;
  for (size_t i = 0; i < limits.size(); ++i)
    out.push_back({non_negative(r.reply->elements[2 * i].integer),
                   non_negative(r.reply->elements[2 * i + 1].integer)});
  return out;
}

} // namespace sluice
