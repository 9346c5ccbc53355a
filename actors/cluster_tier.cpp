#include "actors/cluster_tier.hpp"

#include <deque>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include "messages/admission.hpp"
#include "messages/atoms.hpp"
#include "messages/errors.hpp"
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

struct waiter {
  caf::response_promise promise;
  caf::actor_addr holder;
  time_point deadline;
};

struct cluster_state {
  cluster_tier_config cfg;
  std::optional<redis_client> redis;
  std::optional<lease_pool> pool;
  std::shared_ptr<cluster_tier_stats> stats;
  /// Leases held by this node, with their holders.
  std::unordered_map<std::string, caf::actor_addr> held;
  std::deque<waiter> waiters;
  bool polling = false;

  static inline const char* name = "sluice.cluster_tier";
};

using cluster_actor = caf::stateful_actor<cluster_state>;

void note_counts(cluster_state& st) {
  st.stats->held = static_cast<int64_t>(st.held.size());
  st.stats->waiting = static_cast<int64_t>(st.waiters.size());
}

// Takes a lease for `holder`: the lease, "full" (nullopt, no error), or an
// error (Redis did not answer).
std::optional<std::string> take(cluster_actor* self,
                                const caf::actor_addr& holder,
                                caf::error& err) {
  auto& st = self->state;
  auto got = st.pool->try_acquire();
  if (!got.answered) {
    ++st.stats->errors;
    err = make_error(errc::governance_backend_error, got.error);
    return std::nullopt;
  }
  if (!got.granted)
    return std::nullopt;
  st.held.emplace(got.lease, holder);
  self->monitor(holder);
  note_counts(st);
  return got.lease;
}

void give_back(cluster_actor* self, const std::string& lease) {
  auto& st = self->state;
  auto i = st.held.find(lease);
  if (i == st.held.end())
    return;
  self->demonitor(i->second);
  st.held.erase(i);
  // If Redis cannot be told, the lease lapses by itself within one TTL.
  st.pool->release(lease);
  note_counts(st);
}

void arm_poll(cluster_actor* self) {
  auto& st = self->state;
  if (st.polling || st.waiters.empty())
    return;
  st.polling = true;
  self->delayed_send(self, st.cfg.poll, lease_poll_atom_v);
}

// Serves waiters in order while leases are to be had; drops those whose
// deadline passed (tool_busy naming the global tier).
void serve(cluster_actor* self) {
  auto& st = self->state;
  auto now = self->clock().now();
  while (!st.waiters.empty()) {
    auto& w = st.waiters.front();
    if (deadline_passed(w.deadline, now)) {
      w.promise.deliver(tool_busy(tier_kind::global));
      st.waiters.pop_front();
      continue;
    }
    caf::error err;
    auto lease = take(self, w.holder, err);
    if (err) {
      // Fail closed, and the same for everyone queued behind.
      for (auto& x : st.waiters)
        x.promise.deliver(err);
      st.waiters.clear();
      break;
    }
    if (!lease)
      break; // still full
    w.promise.deliver(std::move(*lease));
    st.waiters.pop_front();
  }
  note_counts(st);
  arm_poll(self);
}

caf::behavior cluster_tier(cluster_actor* self, cluster_tier_config cfg,
                           std::shared_ptr<cluster_tier_stats> stats) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.stats = std::move(stats);
  st.redis.emplace(st.cfg.redis);
  // Lease ids name this node: random, so restarts never reuse one.
  st.pool.emplace(*st.redis, st.cfg.name, st.cfg.cap, st.cfg.lease_ttl,
                  random_node_id());
  self->delayed_send(self, st.cfg.lease_ttl / 3, lease_renew_atom_v);
  // A holder that terminated (its call ended or was cancelled) returns its
  // leases; a waiter that did leaves the queue.
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
      [self](acquire_atom,
             time_point deadline) -> caf::result<std::string> {
        auto& st = self->state;
        auto holder = caf::actor_cast<caf::actor_addr>(self->current_sender());
        if (deadline_passed(deadline, self->clock().now()))
          return tool_busy(tier_kind::global);
        if (st.waiters.empty()) {
          caf::error err;
          auto lease = take(self, holder, err);
          if (err)
            return err;
          if (lease)
            return std::move(*lease);
        }
        st.waiters.push_back(
            waiter{self->make_response_promise(), holder, deadline});
        note_counts(st);
        arm_poll(self);
        return caf::delegated<std::string>{};
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
        if (!st.held.empty()) {
          std::vector<std::string> leases;
          for (auto& [lease, holder] : st.held)
            leases.push_back(lease);
          if (auto lapsed = st.pool->renew(leases)) {
            // Gone from Redis (it restarted, or was out of reach for a
            // TTL): the calls go on, but their leases no longer count.
            for (auto& lease : *lapsed) {
              auto i = st.held.find(lease);
              if (i != st.held.end()) {
                self->demonitor(i->second);
                st.held.erase(i);
                ++st.stats->lost;
              }
            }
            note_counts(st);
          } else {
            ++st.stats->errors;
          }
        }
        self->delayed_send(self, st.cfg.lease_ttl / 3, lease_renew_atom_v);
      },
  };
}

} // namespace

caf::actor spawn_cluster_tier(caf::actor_system& sys, cluster_tier_config cfg,
                              std::shared_ptr<cluster_tier_stats> stats) {
  validate(cfg);
  if (!stats)
    stats = std::make_shared<cluster_tier_stats>();
  return sys.spawn<caf::detached>(cluster_tier, std::move(cfg),
                                  std::move(stats));
}

} // namespace sluice
