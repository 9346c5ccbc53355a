#include "sluice/actors/tier_owner.hpp"

#include <unordered_map>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/permit.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/admission/waiter_queue.hpp"

namespace sluice {

namespace {

tier_status read_status(tier_kind kind, const policy::tier_counter& counter) {
  auto s = counter.load();
  return {kind, counter.cap(), s.in_use, s.waiting};
}

// A caller queued for a permit: whom to answer and whom to observe.
struct pending_acquire {
  caf::typed_response_promise<permit_id> promise;
  caf::strong_actor_ptr holder;
};

using waiters = policy::waiter_queue<pending_acquire>;

struct tier_state {
  tier_kind kind = tier_kind::global;
  std::shared_ptr<policy::tier_counter> counter;
  waiters queue;
  // Queued waiters by holder, to drop them all when a holder terminates.
  std::unordered_multimap<caf::actor_id, waiters::waiter_id> by_holder;
  // The one expiry timer: armed for `expiry_at` (the queue's earliest
  // deadline), numbered so that a replaced timer finds nothing to do.
  bool expiry_armed = false;
  time_point expiry_at{};
  uint64_t expiry_seq = 0;

  static inline const char* name = "sluice.tier";
};

using tier_actor = caf::stateful_actor<tier_state>;

void forget_holder(tier_state& st, caf::actor_id holder,
                   waiters::waiter_id wid) {
  auto [first, last] = st.by_holder.equal_range(holder);
  for (auto i = first; i != last; ++i) {
    if (i->second == wid) {
      st.by_holder.erase(i);
      return;
    }
  }
}

// Takes waiter `wid` out of the queue and stops observing its holder.
pending_acquire dequeue(tier_actor* self, waiters::waiter_id wid) {
  auto& st = self->state;
  auto w = st.queue.take(wid);
  forget_holder(st, w.payload.holder->id(), wid);
  self->demonitor(caf::actor_cast<caf::actor_addr>(w.payload.holder));
  return std::move(w.payload);
}

// The waiters whose deadline passed leave the queue with `tool_busy`.
void expire(tier_actor* self, time_point now) {
  auto& st = self->state;
  for (auto& [wid, w] : st.queue.take_expired(now)) {
    forget_holder(st, w.payload.holder->id(), wid);
    self->demonitor(caf::actor_cast<caf::actor_addr>(w.payload.holder));
    st.counter->remove_waiter();
    w.payload.promise.deliver(tool_busy(st.kind));
  }
}

// One timer for the queue, at its earliest deadline; an earlier deadline
// replaces it. A timer whose waiter was served meanwhile fires early and
// arms the next one.
void arm_expiry(tier_actor* self, time_point now) {
  auto& st = self->state;
  auto at = st.queue.earliest_deadline();
  if (!at || (st.expiry_armed && st.expiry_at <= *at))
    return;
  st.expiry_armed = true;
  st.expiry_at = *at;
  self->delayed_send(self, std::max(*at - now, duration::zero()),
                     expire_atom_v, ++st.expiry_seq);
}

permit_id grant(tier_actor* self, const caf::strong_actor_ptr& holder) {
  auto& st = self->state;
  auto id = st.counter->next_permit_id();
  attach_permit(holder->get(), st.counter, caf::actor_cast<caf::actor>(self),
                id);
  return id;
}

// Hands free permits to queued waiters in FIFO order. A waiter whose
// deadline has passed never takes a permit, even if the timer is still in
// the mailbox behind this message: it leaves first.
void serve_queue(tier_actor* self) {
  auto& st = self->state;
  auto now = self->clock().now();
  expire(self, now);
  while (!st.queue.empty() && st.counter->try_grant_waiter()) {
    auto p = dequeue(self, st.queue.front_id());
    p.promise.deliver(grant(self, p.holder));
  }
  arm_expiry(self, now);
}

caf::behavior tier_owner(tier_actor* self, tier_kind kind,
                         std::shared_ptr<policy::tier_counter> counter) {
  self->state.kind = kind;
  self->state.counter = std::move(counter);
  self->set_down_handler([self](caf::down_msg& dm) {
    // A holder terminated while queued: drop its waiters, answer nobody.
    auto& st = self->state;
    auto [first, last] = st.by_holder.equal_range(dm.source.id());
    for (auto i = first; i != last; ++i) {
      st.queue.take(i->second);
      st.counter->remove_waiter();
    }
    st.by_holder.erase(first, last);
    serve_queue(self);
  });
  return {
      [self](acquire_atom, time_point deadline) -> caf::result<permit_id> {
        auto& st = self->state;
        auto holder = self->current_sender();
        // An anonymous sender cannot hold a permit: nobody could observe it.
        if (!holder)
          return caf::sec::invalid_argument;
        auto now = self->clock().now();
        if (deadline_passed(deadline, now))
          return tool_busy(st.kind);
        // The caller's fast path may have lost a race with a release.
        if (st.queue.empty() && st.counter->try_acquire())
          return grant(self, holder);
        auto promise = self->make_response_promise<permit_id>();
        st.counter->add_waiter();
        auto wid = st.queue.push(deadline, pending_acquire{promise, holder});
        st.by_holder.emplace(holder->id(), wid);
        self->monitor(holder);
        serve_queue(self);
        return promise;
      },
      [self](wake_atom) { serve_queue(self); },
      [self](expire_atom, uint64_t seq) {
        auto& st = self->state;
        if (seq != st.expiry_seq)
          return; // replaced by an earlier one
        st.expiry_armed = false;
        serve_queue(self);
      },
      [self](status_atom) -> tier_status {
        return read_status(self->state.kind, *self->state.counter);
      },
  };
}

} // namespace

tier_status tier_handle::status() const noexcept {
  return read_status(kind, *counter);
}

tier_handle spawn_tier(caf::actor_system& sys, tier_kind kind, uint32_t cap) {
  auto counter = std::make_shared<policy::tier_counter>(cap);
  auto owner = sys.spawn(tier_owner, kind, counter);
  return {kind, std::move(counter), std::move(owner)};
}

} // namespace sluice
