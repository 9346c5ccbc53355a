#include "actors/cluster_tier.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/scope_backend.hpp"
#include "messages/admission.hpp"
#include "messages/atoms.hpp"
#include "runtime/redis_leases.hpp"

namespace sluice {

void validate(const cluster_tier_config& cfg) {
  validate(cfg.redis);
  if (cfg.name.empty())
    throw std::invalid_argument("name: must not be empty");
  if (cfg.cap == 0)
    throw std::invalid_argument("cluster_global_cap: must be positive");
  if (cfg.lease_ttl < std::chrono::milliseconds{100})
    throw std::invalid_argument("lease_ttl: must be at least 100 ms");
  if (cfg.poll <= duration::zero())
    throw std::invalid_argument("poll: must be positive");
}

namespace {

struct cluster_state;

using cluster_actor = caf::stateful_actor<cluster_state>;

/// What the Redis thread hands back to the actor: run in its context.
struct cluster_tier_done {
  std::function<void(cluster_actor*)> apply;
};

} // namespace
} // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::cluster_tier_done)

namespace sluice {
namespace {

struct waiter {
  uint64_t id;
  caf::response_promise promise;
  caf::actor_addr holder;
  time_point deadline;
};

struct cluster_state {
  cluster_tier_config cfg;
  std::shared_ptr<cluster_tier_stats> stats;
  /// Leases held by this node, with their holders.
  std::unordered_map<std::string, caf::actor_addr> held;
  std::deque<waiter> waiters;
  uint64_t next_waiter = 1;
  bool polling = false;
  /// A lease is being asked for (for the first waiter): one at a time, in
  /// order.
  bool asking = false;
  /// Something may have freed while asking: ask again at once if full.
  bool recheck = false;
  /// Redis's last answer was "the cluster is full" (for /status-like
  /// introspection; the busy-or-fault choice rests on `down()`).
  bool full = false;
  /// Used only from jobs, on the worker's thread.
  std::optional<lease_pool> pool;
  /// Last: stopped (its thread joined) before the pool its jobs use goes.
  std::unique_ptr<redis_worker> redis;

  static inline const char* name = "sluice.cluster_tier";
};

void note_counts(cluster_state& st) {
  st.stats->held = static_cast<int64_t>(st.held.size());
  st.stats->waiting = static_cast<int64_t>(st.waiters.size());
}

// Hands `f` to the actor from the Redis thread, if the actor still lives.
template <class F>
void back_to(const caf::weak_actor_ptr& me, F f) {
  if (auto strong = caf::actor_cast<caf::actor>(me.lock()))
    caf::anon_send(strong, cluster_tier_done{std::move(f)});
}

// One command timeout from now at the latest (the worker bounds it so too).
steady::time_point redis_deadline(cluster_actor* self,
                                  std::optional<time_point> call_deadline) {
  auto& st = self->state;
  auto now = steady::now();
  auto d = now + st.cfg.redis.command_timeout;
  if (call_deadline)
    d = std::min(d, now + (*call_deadline - self->clock().now()));
  return d;
}

// Tells Redis a lease is free; if it cannot be told, the lease lapses by
// itself within one TTL.
void release_in_redis(cluster_actor* self, std::string lease) {
  auto& st = self->state;
  if (st.redis->down())
    return;
  auto* pool = &*st.pool;
  st.redis->submit(
      redis_deadline(self, std::nullopt),
      [pool, lease = std::move(lease)](redis_client&) { pool->release(lease); },
      [](const std::string&) {});
}

void give_back(cluster_actor* self, const std::string& lease) {
  auto& st = self->state;
  auto i = st.held.find(lease);
  if (i == st.held.end())
    return;
  self->demonitor(i->second);
  st.held.erase(i);
  release_in_redis(self, lease);
  note_counts(st);
}

// Fails every waiter closed: Redis did not answer.
void fail_all(cluster_actor* self, const std::string& why) {
  auto& st = self->state;
  ++st.stats->errors;
  auto err = redis_fault(why);
  for (auto& w : st.waiters)
    w.promise.deliver(err);
  st.waiters.clear();
  note_counts(st);
}

// Ends the waits whose deadline passed: busy, unless Redis is down (then
// it fails closed).
void expire(cluster_actor* self) {
  auto& st = self->state;
  auto now = self->clock().now();
  for (auto i = st.waiters.begin(); i != st.waiters.end();) {
    if (!deadline_passed(i->deadline, now)) {
      ++i;
      continue;
    }
    // Busy unless Redis is down: a question that Redis was too slow to
    // answer marks it down (and fails everyone closed at once); `full`
    // alone is no guide, a grant to another waiter clears it.
    if (!st.redis->down()) {
      i->promise.deliver(tool_busy(tier_kind::global));
    } else {
      ++st.stats->errors;
      i->promise.deliver(redis_fault("redis too slow: no lease answer before "
                                     "the admission deadline"));
    }
    i = st.waiters.erase(i);
  }
}

void arm_poll(cluster_actor* self) {
  auto& st = self->state;
  if (st.polling || st.waiters.empty())
    return;
  st.polling = true;
  self->delayed_send(self, st.cfg.poll, lease_poll_atom_v);
}

void on_answer(cluster_actor* self, uint64_t id, lease_pool::outcome out);

// Asks Redis for a lease for the first waiter, unless a question is out.
void ask(cluster_actor* self) {
  auto& st = self->state;
  if (st.waiters.empty())
    return;
  if (st.asking) {
    st.recheck = true;
    return;
  }
  if (st.redis->down()) {
    fail_all(self, "redis down (failing closed until it answers again)");
    return;
  }
  auto& w = st.waiters.front();
  st.asking = true;
  st.recheck = false;
  auto me = caf::actor_cast<caf::weak_actor_ptr>(self);
  auto* pool = &*st.pool;
  auto id = w.id;
  st.redis->submit(
      redis_deadline(self, w.deadline),
      [me, pool, id](redis_client&) {
        auto out = pool->try_acquire();
        back_to(me,
                [id, out](cluster_actor* self) { on_answer(self, id, out); });
      },
      [me, id](const std::string& why) {
        lease_pool::outcome out;
        out.error = why;
        back_to(me,
                [id, out](cluster_actor* self) { on_answer(self, id, out); });
      });
}

// Serves the waiters in order while leases are to be had.
void serve(cluster_actor* self) {
  expire(self);
  ask(self);
  note_counts(self->state);
  arm_poll(self);
}

void on_answer(cluster_actor* self, uint64_t id, lease_pool::outcome out) {
  auto& st = self->state;
  st.asking = false;
  if (!out.answered) {
    if (st.redis->down()) {
      // Fail closed, and the same for everyone queued behind.
      fail_all(self, out.error);
      return;
    }
    // Only this waiter's question failed (its deadline was too near for
    // Redis, or an error answer): it fails closed, the others go on.
    auto i = std::find_if(st.waiters.begin(), st.waiters.end(),
                          [id](const waiter& w) { return w.id == id; });
    if (i != st.waiters.end()) {
      if (deadline_passed(i->deadline, self->clock().now())) {
        // Cut short by the call's own deadline (Redis is not down): the
        // wait for a lease ran out, a busy cluster, not a Redis fault.
        i->promise.deliver(tool_busy(tier_kind::global));
      } else {
        ++st.stats->errors;
        i->promise.deliver(redis_fault(out.error));
      }
      st.waiters.erase(i);
    }
    serve(self);
    return;
  }
  st.full = !out.granted;
  if (out.granted) {
    auto i = std::find_if(st.waiters.begin(), st.waiters.end(),
                          [id](const waiter& w) { return w.id == id; });
    if (i == st.waiters.end()) {
      release_in_redis(self, out.lease); // its wait ended meanwhile
    } else {
      st.held.emplace(out.lease, i->holder);
      self->monitor(i->holder);
      i->promise.deliver(out.lease);
      st.waiters.erase(i);
    }
    serve(self);
    return;
  }
  // Full: ask again when the poll fires or a lease frees, not in a loop.
  expire(self);
  if (st.recheck)
    ask(self);
  note_counts(st);
  arm_poll(self);
}

caf::behavior cluster_tier(cluster_actor* self, cluster_tier_config cfg,
                           std::shared_ptr<cluster_tier_stats> stats) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.stats = std::move(stats);
  st.redis = std::make_unique<redis_worker>(st.cfg.redis, "cluster tier");
  // Lease ids name this node: random, so restarts never reuse one.
  st.pool.emplace(st.redis->connection(), st.cfg.name, st.cfg.cap,
                  st.cfg.lease_ttl, random_node_id());
  self->delayed_send(self, st.cfg.lease_ttl / 3, lease_renew_atom_v);
  // A holder that terminated (its call ended or was cancelled) returns its
  // leases.
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    std::vector<std::string> gone;
    for (auto& [lease, holder] : st.held)
      if (holder == dm.source)
        gone.push_back(lease);
    for (auto& lease : gone)
      give_back(self, lease);
    serve(self);
  });
  return {
      [self](acquire_atom, time_point deadline) -> caf::result<std::string> {
        auto& st = self->state;
        // Down: fail closed at once, no queueing behind Redis.
        if (st.redis->down()) {
          ++st.stats->errors;
          return redis_fault("redis down (failing closed until it answers "
                             "again)");
        }
        if (deadline_passed(deadline, self->clock().now()))
          return tool_busy(tier_kind::global);
        auto holder = caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto rp = self->make_response_promise<std::string>();
        st.waiters.push_back(waiter{st.next_waiter++, rp, holder, deadline});
        serve(self);
        return rp;
      },
      [self](lease_release_atom, const std::string& lease) {
        give_back(self, lease);
        serve(self);
      },
      [self](lease_poll_atom) {
        self->state.polling = false;
        serve(self);
      },
      [self](lease_renew_atom) {
        auto& st = self->state;
        self->delayed_send(self, st.cfg.lease_ttl / 3, lease_renew_atom_v);
        if (st.held.empty())
          return;
        if (st.redis->down()) {
          ++st.stats->errors; // they lapse if it stays down for a TTL
          return;
        }
        std::vector<std::string> leases;
        for (auto& [lease, holder] : st.held)
          leases.push_back(lease);
        auto me = caf::actor_cast<caf::weak_actor_ptr>(self);
        auto* pool = &*st.pool;
        auto stats = st.stats;
        st.redis->submit(
            redis_deadline(self, std::nullopt),
            [me, pool, stats, leases](redis_client&) {
              auto lapsed = pool->renew(leases);
              if (!lapsed) {
                ++stats->errors;
                return;
              }
              back_to(me, [lapsed = std::move(*lapsed)](cluster_actor* self) {
                // Gone from Redis (it restarted, or was out of reach for a
                // TTL): the calls go on, but their leases no longer count.
                auto& st = self->state;
                for (auto& lease : lapsed) {
                  auto i = st.held.find(lease);
                  if (i != st.held.end()) {
                    self->demonitor(i->second);
                    st.held.erase(i);
                    ++st.stats->lost;
                  }
                }
                note_counts(st);
              });
            },
            [stats](const std::string&) { ++stats->errors; });
      },
      [self](cluster_tier_done& done) { done.apply(self); },
  };
}

} // namespace

caf::actor spawn_cluster_tier(caf::actor_system& sys, cluster_tier_config cfg,
                              std::shared_ptr<cluster_tier_stats> stats) {
  validate(cfg);
  if (!stats)
    stats = std::make_shared<cluster_tier_stats>();
  // Detached: the actor itself never blocks (Redis has a thread of its
  // own), but stopping it joins that thread, which may wait for the
  // command in flight -- never on a CAF worker.
  return sys.spawn<caf::detached>(cluster_tier, std::move(cfg),
                                  std::move(stats));
}

} // namespace sluice
