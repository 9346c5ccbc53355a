#include "sluice/runtime/redis/lease_pool.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/redis/lua.hpp"
#include "sluice/runtime/redis/subscriber.hpp"

namespace sluice {

namespace {

const std::vector<redis_reply> no_elements;

// Every script starts from the server's clock and drops lapsed leases, so
// no node's clock and no stale lease ever counts.
// Full: {0, ms until the earliest lease lapses unless renewed}.
const std::string acquire_script = redis_lua::timed(R"(
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(0, tonumber(first[2]) - now)}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, 0}
)");

// Gives a lease back; when the cap was reached, tells waiting nodes
// (ARGV: lease, cap, this node, the channel). Not otherwise: a notice per
// release would cost every node a message per call.
const std::string release_script = R"(
local full = redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 and full then
  redis.call('PUBLISH', ARGV[4], ARGV[3])
end
return 1
)";

const std::string renew_script = redis_lua::timed(R"(
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
)");

const std::string live_script = redis_lua::timed(R"(
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
)");

} // namespace

void validate_lease_limits(uint32_t cap, duration ttl) {
  if (cap == 0)
    throw field_error("cluster_global_cap", "must be positive");
  if (ttl < min_lease_ttl)
    throw field_error("lease_ttl", "must be at least 100 ms");
}

lease_pool::lease_pool(redis_client& redis, std::string name, uint32_t cap,
                       duration ttl, std::string node)
    : redis_(redis)
    , key_(redis.key("leases:" + name))
    , cap_(cap)
    , ttl_(ttl)
    , node_(std::move(node)) {
  validate_lease_limits(cap_, ttl_);
}

lease_pool::outcome lease_pool::try_acquire() {
  outcome out;
  auto id = node_ + ":" + std::to_string(next_++);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(ttl_);
  auto r = redis_.eval(acquire_script, {key_},
                       {std::to_string(cap_), std::to_string(ms.count()), id});
  auto& e = r.ok() ? r.reply->elements : no_elements;
  if (!r.ok() || r.reply->type != redis_reply::kind::array || e.size() != 2 ||
      e[0].type != redis_reply::kind::integer ||
      e[1].type != redis_reply::kind::integer) {
    out.error = r.ok() ? "unexpected answer" : r.error;
    out.fault = r.fault;
    return out;
  }
  out.answered = true;
  out.granted = e[0].integer == 1;
  if (out.granted)
    out.permit = std::move(id);
  else
    out.retry_in = std::chrono::milliseconds{
        std::clamp<int64_t>(e[1].integer, 0, int64_t{24} * 3600 * 1000)};
  return out;
}

bool lease_pool::release(const std::string& lease) {
  return redis_
      .eval(release_script, {key_},
            {lease, std::to_string(cap_), node_, freed_channel()})
      .ok();
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

// -- the cluster tier's store
// ---------------------------------------------------

namespace {

/// The least time a question is given: less cannot be met (the client's
/// own floor, `min_command_time`).
constexpr duration min_question_time = std::chrono::milliseconds{1};

// A store's handler, called exactly once as `lease_store` promises: by the
// job, or -- when the job throws before it could call it -- with a failure.
template <class T>
class once {
public:
  explicit once(std::function<void(T)> f)
      : f_(std::move(f)) {
    // nop
  }

  void operator()(T x) {
    if (!called_.exchange(true))
      f_(std::move(x));
  }

  void fail(std::string why) {
    if constexpr (std::is_same_v<T, lease_store::grant>) {
      T g;
      g.error = std::move(why);
      (*this)(std::move(g));
    } else {
      (*this)(T{});
    }
  }

private:
  std::function<void(T)> f_;
  std::atomic<bool> called_{false};
};

class redis_lease_store final : public lease_store {
public:
  redis_lease_store(redis_config cfg, std::string name, uint32_t cap,
                    duration ttl, caf::actor_system* sys)
      : worker_(std::make_unique<redis_worker>(for_role(cfg, "leases"),
                                               "cluster tier", sys))
      // Lease ids name this node: random, so restarts never reuse one.
      , pool_(worker_->connection(), std::move(name), cap, ttl,
              random_node_id()) {
    redis_subscriber::handlers h;
    h.message = [wake = wake_, node = pool_.node()](const std::string& who) {
      if (who != node) // our own release: the tier knows
        wake->call();
    };
    // A notice missed while unsubscribed is covered by the tier's own
    // timers (the earliest lapse, the safety poll).
    freed_ = redis_subscriber::start(sys, for_role(cfg, "leases-sub"),
                                     pool_.freed_channel(), max_notice,
                                     std::move(h));
  }

  // The threads are joined before the pool their jobs use goes.
  ~redis_lease_store() override {
    freed_->stop();
    worker_.reset();
  }

  void on_freed(std::function<void()> wake) override {
    wake_->set(std::move(wake));
  }

  void try_acquire(duration within, std::function<void(grant)> done) override {
    auto answer = std::make_shared<once<grant>>(std::move(done));
    // Less time than one command can be given: not asked, a late question
    // (the caller's wait ran out; busy, not a fault).
    if (within < min_question_time) {
      grant g;
      g.late = true;
      g.error = "no time left to ask Redis";
      (*answer)(std::move(g));
      return;
    }
    auto until = deadline(within);
    worker_->submit(
        until,
        [this, answer](redis_client&) {
          try {
            (*answer)(pool_.try_acquire());
          } catch (...) {
            answer->fail("the cluster tier's question to Redis failed");
          }
        },
        // Not `this`: the worker may refuse queued jobs after a job's answer
        // destroyed this store (see `redis_worker`).
        [answer, until](const std::string& why) {
          grant g;
          g.error = why;
          // Refused while queued: Redis is down (a fault), or the question
          // waited behind a slow Redis past its deadline (late).
          g.fault = why.rfind(redis_worker::down_refusal, 0) == 0;
          g.late = !g.fault && steady::now() >= until;
          (*answer)(std::move(g));
        });
  }

  void release(const std::string& permit) override {
    if (worker_->down())
      return; // it lapses within one TTL
    worker_->submit(
        deadline(worker_->config().command_timeout),
        [this, permit](redis_client&) { pool_.release(permit); },
        [](const std::string&) {});
  }

  void renew(std::vector<std::string> permits,
             std::function<void(lapsed)> done) override {
    auto answer = std::make_shared<once<lapsed>>(std::move(done));
    worker_->submit(
        deadline(worker_->config().command_timeout),
        [this, answer, permits = std::move(permits)](redis_client&) {
          try {
            (*answer)(pool_.renew(permits));
          } catch (...) {
            (*answer)(std::nullopt);
          }
        },
        [answer](const std::string&) { (*answer)(std::nullopt); });
  }

  bool down() const override { return worker_->down(); }

  duration ttl() const override { return pool_.ttl(); }

private:
  // At most one command timeout from now (the worker bounds it so too).
  steady::time_point deadline(duration within) const {
    return steady::now() + std::min(within, worker_->config().command_timeout);
  }

  /// A node's name, longer ones skipped.
  static constexpr size_t max_notice = 256;

  /// The owner's `on_freed`, called from the subscriber's thread.
  struct wake_slot {
    std::mutex mx;
    std::function<void()> f;
    void set(std::function<void()> g) {
      std::lock_guard<std::mutex> guard{mx};
      f = std::move(g);
    }
    void call() {
      std::lock_guard<std::mutex> guard{mx};
      if (f)
        f();
    }
  };

  std::shared_ptr<wake_slot> wake_ = std::make_shared<wake_slot>();
  std::unique_ptr<redis_worker> worker_;
  lease_pool pool_;
  std::shared_ptr<redis_subscriber> freed_;
};

} // namespace

std::shared_ptr<lease_store>
make_redis_lease_store(caf::actor_system& sys, redis_config cfg,
                       std::string name, uint32_t cap, duration ttl) {
  validate(cfg);
  validate_lease_limits(cap, ttl);
  if (name.empty())
    throw field_error("name", "must not be empty");
  return std::make_shared<redis_lease_store>(std::move(cfg), std::move(name),
                                             cap, ttl, &sys);
}

} // namespace sluice
