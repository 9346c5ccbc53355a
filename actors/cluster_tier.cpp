#include "sluice/actors/cluster_tier.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/messages/admission.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/admission/waiter_queue.hpp"

namespace sluice {

void validate(const cluster_tier_config& cfg) {
  if (cfg.poll <= duration::zero())
    throw field_error("poll", "must be positive");
}

namespace {

struct cluster_state;

using cluster_actor = caf::stateful_actor<cluster_state>;

/// What a waiter is answered with, and who will hold its permit.
struct pending_permit {
  caf::response_promise promise;
  caf::actor_addr holder;
};

using waiters = policy::waiter_queue<pending_permit>;

struct cluster_state {
  cluster_tier_config cfg;
  std::shared_ptr<cluster_tier_stats> stats;
  std::shared_ptr<lease_store> store;
  /// Permits held by this node, with their holders.
  std::unordered_map<std::string, caf::actor_addr> held;
  /// How many permits each holder has: it is monitored while it has one
  /// (CAF 0.17's `demonitor` removes every monitor of an actor at once).
  std::unordered_map<caf::actor_addr, uint32_t> holders;
  waiters queue;
  /// The retry timer: armed, for when, and its number (an earlier one
  /// replaces it; a replaced one is ignored when it fires).
  bool polling = false;
  time_point poll_at{};
  uint64_t poll_seq = 0;
  /// The store said full: the earliest permit lapses then, unless renewed.
  std::optional<time_point> retry_at;
  /// A permit is being asked for (for the first waiter): one question at a
  /// time, in FIFO order.
  bool asking = false;
  /// Something may have freed while asking: ask again at once if full.
  bool recheck = false;

  static inline const char* name = "sluice.cluster_tier";
};

/// The least wait before asking again at the instant the store named: a
/// holder renewing late must not turn waiters into a busy loop.
constexpr duration min_lease_retry = std::chrono::milliseconds{10};

const char* store_down = "the cluster's permit store is down (failing "
                         "closed until it answers again)";

void note_counts(cluster_state& st) {
  st.stats->held = static_cast<int64_t>(st.held.size());
  st.stats->waiting = static_cast<int64_t>(st.queue.size());
}

void hold(cluster_actor* self, std::string permit, caf::actor_addr holder) {
  auto& st = self->state;
  if (st.holders[holder]++ == 0)
    self->monitor(holder);
  st.held.emplace(std::move(permit), std::move(holder));
}

// Forgets `permit` (which is held) and, with its holder's last, the holder.
void unhold(cluster_actor* self,
            std::unordered_map<std::string, caf::actor_addr>::iterator i) {
  auto& st = self->state;
  auto h = st.holders.find(i->second);
  if (h != st.holders.end() && --h->second == 0) {
    self->demonitor(i->second);
    st.holders.erase(h);
  }
  st.held.erase(i);
}

void give_back(cluster_actor* self, const std::string& permit) {
  auto& st = self->state;
  auto i = st.held.find(permit);
  if (i == st.held.end())
    return;
  unhold(self, i);
  st.store->release(permit);
  note_counts(st);
}

// Fails every waiter closed: the store did not answer.
void fail_all(cluster_actor* self, const std::string& why) {
  auto& st = self->state;
  ++st.stats->errors;
  auto err = backend_fault(why);
  std::vector<waiters::waiter_id> ids;
  st.queue.for_each([&](auto id, auto&) { ids.push_back(id); });
  for (auto id : ids)
    st.queue.take(id).payload.promise.deliver(err);
  note_counts(st);
}

// Ends the waits whose deadline passed: busy, unless the store is down
// (then it fails closed). `full` is no guide: a question the store was too
// slow to answer marks it down, and a grant to another waiter proves the
// cluster is not full.
void expire(cluster_actor* self) {
  auto& st = self->state;
  for (auto& [id, w] : st.queue.take_expired(self->clock().now())) {
    if (!st.store->down()) {
      w.payload.promise.deliver(tool_busy(tier_kind::global));
    } else {
      ++st.stats->errors;
      w.payload.promise.deliver(
          backend_fault("the cluster's permit store was too slow: no answer "
                        "before the admission deadline"));
    }
  }
}

// While callers wait: serve again at the earliest of the safety poll, the
// instant the store named (a permit may lapse), and the first deadline.
void arm_poll(cluster_actor* self) {
  auto& st = self->state;
  if (st.queue.empty())
    return;
  auto now = self->clock().now();
  auto at = now + st.cfg.poll;
  if (st.retry_at && *st.retry_at > now)
    at = std::min(at, *st.retry_at);
  at = std::min(at, *st.queue.earliest_deadline());
  if (st.polling && st.poll_at <= at)
    return;
  st.polling = true;
  st.poll_at = at;
  self->delayed_send(self, std::max(at - now, duration::zero()),
                     lease_poll_atom_v, ++st.poll_seq);
}

void on_answer(cluster_actor* self, waiters::waiter_id id,
               lease_store::grant out);

// Asks the store for a permit for the first waiter, unless a question is
// out.
void ask(cluster_actor* self) {
  auto& st = self->state;
  if (st.queue.empty())
    return;
  if (st.asking) {
    st.recheck = true;
    return;
  }
  if (st.store->down()) {
    fail_all(self, store_down);
    return;
  }
  auto id = st.queue.front_id();
  auto within = st.queue.find(id)->deadline - self->clock().now();
  st.asking = true;
  st.recheck = false;
  ++st.stats->asked;
  weak_self<cluster_actor> me{self};
  st.store->try_acquire(within, [me, id](lease_store::grant out) {
    back_to(me, [id, out = std::move(out)](cluster_actor* self) {
      on_answer(self, id, out);
    });
  });
}

// Serves the waiters in order while permits are to be had.
void serve(cluster_actor* self) {
  expire(self);
  ask(self);
  note_counts(self->state);
  arm_poll(self);
}

void on_answer(cluster_actor* self, waiters::waiter_id id,
               lease_store::grant out) {
  auto& st = self->state;
  st.asking = false;
  if (!out.answered) {
    // The answer says so itself: the store's thread may not have marked it
    // down yet when this arrives.
    if (out.fault || st.store->down()) {
      // Fail closed, and the same for everyone queued behind.
      fail_all(self, out.error);
      return;
    }
    // Only this waiter's question failed (its deadline was too near for
    // the store, or an error answer): it fails closed, the others go on.
    if (st.queue.find(id) != nullptr) {
      auto w = st.queue.take(id);
      if (out.late || deadline_passed(w.deadline, self->clock().now())) {
        // Cut short by the call's own deadline (the store is not down):
        // the wait for a permit ran out, a busy cluster, not a fault.
        w.payload.promise.deliver(tool_busy(tier_kind::global));
      } else {
        ++st.stats->errors;
        w.payload.promise.deliver(backend_fault(out.error));
      }
    }
    serve(self);
    return;
  }
  if (out.granted) {
    if (st.queue.find(id) == nullptr) {
      st.store->release(out.permit); // its wait ended meanwhile
    } else {
      auto w = st.queue.take(id);
      hold(self, out.permit, w.payload.holder);
      w.payload.promise.deliver(out.permit);
    }
    serve(self);
    return;
  }
  // Full: ask again when the poll fires or a permit frees, not in a loop.
  if (out.retry_in > duration::zero())
    st.retry_at =
        self->clock().now() + std::max<duration>(out.retry_in, min_lease_retry);
  else
    st.retry_at.reset();
  expire(self);
  if (st.recheck)
    ask(self);
  note_counts(st);
  arm_poll(self);
}

// Extends the permits held; drops those the store says lapsed.
void renew(cluster_actor* self) {
  auto& st = self->state;
  if (st.held.empty())
    return;
  if (st.store->down()) {
    ++st.stats->errors; // they lapse if it stays down for a TTL
    return;
  }
  std::vector<std::string> permits;
  for (auto& [permit, holder] : st.held)
    permits.push_back(permit);
  weak_self<cluster_actor> me{self};
  auto stats = st.stats;
  st.store->renew(std::move(permits), [me, stats](lease_store::lapsed gone) {
    if (!gone) {
      ++stats->errors;
      return;
    }
    back_to(me, [gone = std::move(*gone)](cluster_actor* self) {
      // Gone from the store (it restarted, or was out of reach for a TTL):
      // the calls go on, but their permits no longer count.
      auto& st = self->state;
      for (auto& permit : gone) {
        auto i = st.held.find(permit);
        if (i != st.held.end()) {
          unhold(self, i);
          ++st.stats->lost;
        }
      }
      note_counts(st);
    });
  });
}

caf::behavior cluster_tier(cluster_actor* self, cluster_tier_config cfg,
                           std::shared_ptr<lease_store> store,
                           std::shared_ptr<cluster_tier_stats> stats) {
  auto& st = self->state;
  st.cfg = cfg;
  st.store = std::move(store);
  st.stats = std::move(stats);
  // Every third of a TTL, so two renewals may fail before a permit lapses;
  // never more often than every millisecond, whatever the store says.
  auto renew_every =
      std::max<duration>(st.store->ttl() / 3, std::chrono::milliseconds{1});
  self->delayed_send(self, renew_every, lease_renew_atom_v);
  // Another node freed a permit while the cap was reached: ask now.
  weak_self<cluster_actor> me{self};
  st.store->on_freed([me] {
    back_to(me, [](cluster_actor* self) {
      ++self->state.stats->woken;
      serve(self);
    });
  });
  // A holder that terminated (its call ended or was cancelled) returns its
  // permits. Waiters are not monitored: one that terminated while waiting
  // is served in its turn, and the permit comes back at once (monitoring
  // a dead actor reports it down at once).
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    std::vector<std::string> gone;
    for (auto& [permit, holder] : st.held)
      if (holder == dm.source)
        gone.push_back(permit);
    for (auto& permit : gone)
      give_back(self, permit);
    serve(self);
  });
  return {
      [self](acquire_atom, time_point deadline) -> caf::result<std::string> {
        auto& st = self->state;
        // Down: fail closed at once, no queueing behind the store.
        if (st.store->down()) {
          ++st.stats->errors;
          return backend_fault(store_down);
        }
        if (deadline_passed(deadline, self->clock().now()))
          return tool_busy(tier_kind::global);
        auto holder = caf::actor_cast<caf::actor_addr>(self->current_sender());
        // An anonymous sender cannot hold a permit: nobody could see it go,
        // and renewal would keep the permit for ever.
        if (!holder)
          return caf::sec::invalid_argument;
        auto rp = self->make_response_promise<std::string>();
        st.queue.push(deadline, pending_permit{rp, holder});
        serve(self);
        return rp;
      },
      [self](lease_release_atom, const std::string& permit) {
        give_back(self, permit);
        serve(self);
      },
      [self](lease_poll_atom, uint64_t seq) {
        auto& st = self->state;
        if (seq != st.poll_seq)
          return; // replaced by an earlier one
        st.polling = false;
        serve(self);
      },
      [self, renew_every](lease_renew_atom) {
        self->delayed_send(self, renew_every, lease_renew_atom_v);
        renew(self);
      },
      [self](actor_thunk& t) { t.run(self); },
  };
}

} // namespace

caf::actor spawn_cluster_tier(caf::actor_system& sys, cluster_tier_config cfg,
                              std::shared_ptr<lease_store> store,
                              std::shared_ptr<cluster_tier_stats> stats,
                              bool detached) {
  validate(cfg);
  if (!store)
    throw field_error("store", "must not be null");
  if (store->ttl() <= duration::zero())
    throw field_error("lease_ttl", "must be positive");
  if (!stats)
    stats = std::make_shared<cluster_tier_stats>();
  if (detached)
    return sys.spawn<caf::detached>(cluster_tier, cfg, std::move(store),
                                    std::move(stats));
  return sys.spawn(cluster_tier, cfg, std::move(store), std::move(stats));
}

} // namespace sluice
