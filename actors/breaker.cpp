#include "sluice/actors/breaker.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/messages/atoms.hpp"

namespace sluice {

namespace {

/// What a caller refused while the claim is out is told to wait (it is
/// woken earlier by the transition, if any).
constexpr duration probe_claim_wait = std::chrono::milliseconds{100};

// A half-open probe in flight: who holds it and when it lapses.
struct probe_lease {
  lease_id id;
  caf::actor_addr holder;
  time_point expires;
};

struct breaker_actor_state {
  std::string source;
  std::optional<policy::breaker_policy> machine;
  std::shared_ptr<policy::breaker_mirror> mirror;
  std::vector<probe_lease> leases;
  lease_id next_lease = 1;
  std::vector<caf::actor> subscribers;
  /// Shared with other nodes: the cluster's probe lease is claimed through
  /// this relay before each half-open (none: decide alone).
  caf::actor probe_gate;
  /// The generation a claim is out for (one at a time).
  std::optional<uint64_t> claim_for;
  /// Until when this node's claim lets it probe (half-open, shared).
  time_point cluster_lease_until{};
  /// A reload took its source out: it serves the calls still draining and
  /// tells no one (no new subscriber either).
  bool retired = false;
  /// The routes' ejection limits (none: the window alone decides).
  std::shared_ptr<shared_ejections::seat> ejections;

  static inline const char* name = "sluice.breaker";
};

using breaker_actor = caf::stateful_actor<breaker_actor_state>;

breaker_status status_of(breaker_actor* self) {
  auto& st = self->state;
  auto& m = *st.machine;
  auto w = m.window(self->clock().now());
  return {st.source,
          m.state(),
          m.generation(),
          m.open_until(),
          m.isolated(),
          w.calls,
          w.failures,
          static_cast<uint32_t>(st.leases.size()),
          static_cast<uint32_t>(st.subscribers.size())};
}

void drop_lease(breaker_actor* self, std::vector<probe_lease>::iterator i) {
  auto holder = i->holder;
  auto& st = self->state;
  st.leases.erase(i);
  // Stop observing the holder unless it still holds another lease or
  // subscribes: CAF 0.17's `demonitor` removes every monitor of an actor
  // at once, not one.
  bool leases =
      std::any_of(st.leases.begin(), st.leases.end(),
                  [&](const probe_lease& l) { return l.holder == holder; });
  bool subscribed =
      std::any_of(st.subscribers.begin(), st.subscribers.end(),
                  [&](const caf::actor& s) { return s.address() == holder; });
  if (!leases && !subscribed)
    self->demonitor(holder);
}

std::vector<probe_lease>::iterator find_lease(breaker_actor* self,
                                              lease_id id) {
  auto& ls = self->state.leases;
  return std::find_if(ls.begin(), ls.end(),
                      [id](const probe_lease& l) { return l.id == id; });
}

// Makes a transition visible: mirror first (after the authoritative state,
// release ordering), then timers and leases, then subscribers in order.
void announce(breaker_actor* self, const policy::breaker_transition& t,
              bool from_peer = false) {
  auto& st = self->state;
  st.mirror->publish(t.to, t.generation);
  if (st.ejections)
    st.ejections->with([&](policy::ejection_ledger& l, const std::string& s) {
      if (t.to == breaker_state::closed)
        l.restored(s);
      else
        l.ejected(s);
    });
  if (t.from == breaker_state::half_open)
    while (!st.leases.empty())
      drop_lease(self, st.leases.begin());
  if (t.to == breaker_state::open && !st.machine->isolated())
    self->delayed_send(self, st.machine->open_until() - t.at, half_open_atom_v,
                       t.generation);
  breaker_event ev{st.source, t.from, t.to, t.generation, t.at};
  if (t.to == breaker_state::open)
    ev.open_for = st.machine->open_until() - t.at;
  ev.from_peer = from_peer;
  for (auto& sub : st.subscribers)
    self->send(sub, ev);
}

void announce_if(breaker_actor* self,
                 const std::optional<policy::breaker_transition>& t) {
  if (t)
    announce(self, *t);
}

void on_claim(breaker_actor* self, uint64_t generation, duration left);

// Asks the relay for the cluster's probe lease: one claim per generation
// at a time (a claim of an older generation no longer counts).
void claim(breaker_actor* self) {
  auto& st = self->state;
  auto generation = st.machine->generation();
  if (st.claim_for == generation)
    return;
  st.claim_for = generation;
  self->request(st.probe_gate, probe_claim_timeout, probe_claim_atom_v,
                st.source, st.machine->config().open_duration)
      .then([self,
             generation](duration left) { on_claim(self, generation, left); },
            [self, generation](caf::error&) {
              on_claim(self, generation, probe_claim_unanswered);
            });
}

// The open period is over (by the timer, or seen by a request ahead of
// it): half-open now -- or, shared with other nodes, once this node holds
// the cluster's probe lease (SPEC: one probe per cluster).
void open_elapsed(breaker_actor* self, time_point now) {
  auto& st = self->state;
  auto& m = *st.machine;
  if (!st.probe_gate) {
    announce_if(self, m.on_open_elapsed(now));
    return;
  }
  if (m.state() == breaker_state::open && !m.isolated() &&
      deadline_passed(m.open_until(), now))
    claim(self);
}

// Open and not isolated, with no timer to end it: the period was extended
// while a claim was out (a peer's opening, a Retry-After), after the timer
// had fired. Without a new one nothing would ever half-open it: the
// governors skip an open breaker without asking it.
void rearm(breaker_actor* self, time_point now) {
  auto& m = *self->state.machine;
  if (m.state() != breaker_state::open || m.isolated())
    return;
  if (deadline_passed(m.open_until(), now))
    open_elapsed(self, now);
  else
    self->delayed_send(self, m.open_until() - now, half_open_atom_v,
                       m.generation());
}

void on_claim(breaker_actor* self, uint64_t generation, duration left) {
  auto& st = self->state;
  auto& m = *st.machine;
  if (st.claim_for == generation)
    st.claim_for.reset();
  // Moved on meanwhile (a peer's verdict, an operator, its own window):
  // that transition armed what it needs.
  if (generation != m.generation() || m.state() == breaker_state::closed ||
      m.isolated())
    return;
  auto now = self->clock().now();
  if (left <= duration::zero()) {
    // Ours for one open period -- or Redis did not answer, and this node
    // decides alone for as long.
    st.cluster_lease_until = now + m.config().open_duration;
    if (auto t = m.on_open_elapsed(now))
      announce(self, *t);
    else
      rearm(self, now); // extended while the claim was out
    return;
  }
  // Another node probes: stay open until its lease ends (its verdict,
  // relayed, usually comes first), then claim again. Not published: this
  // node decided nothing.
  if (m.state() == breaker_state::open) {
    m.hold_open_until(now + left, now);
    rearm(self, now);
  } else if (auto t = m.hold_open_until(now + left, now)) {
    announce(self, *t, true);
  }
}

breaker_verdict allow(breaker_actor* self) {
  auto& st = self->state;
  auto& m = *st.machine;
  auto now = self->clock().now();
  // The half-open timer may still be in the mailbox behind this request.
  open_elapsed(self, now);
  using decision = breaker_verdict::decision;
  switch (m.state()) {
  case breaker_state::closed:
    return {decision::go, m.generation(), 0, {}};
  case breaker_state::open:
    return {decision::rejected, m.generation(), 0, m.open_until()};
  case breaker_state::half_open:
    break;
  }
  auto holder = self->current_sender();
  // Shared: a probe goes only under this node's cluster probe lease; once
  // it lapsed unused (no call came), it is claimed again first.
  if (st.probe_gate && holder != nullptr && st.leases.empty() &&
      deadline_passed(st.cluster_lease_until, now)) {
    claim(self);
    return {decision::rejected, m.generation(), 0, now + probe_claim_wait};
  }
  if (holder == nullptr || st.leases.size() >= m.config().half_open_probes) {
    auto soonest = now + m.config().open_duration;
    for (auto& l : st.leases)
      soonest = std::min(soonest, l.expires);
    return {decision::rejected, m.generation(), 0, soonest};
  }
  // The lease lapses after one open period, so a hung probe delays recovery
  // by at most that; a holder that dies frees it at once (monitor).
  probe_lease lease{st.next_lease++, caf::actor_cast<caf::actor_addr>(holder),
                    now + m.config().open_duration};
  st.leases.push_back(lease);
  self->monitor(holder);
  self->delayed_send(self, m.config().open_duration, lease_expire_atom_v,
                     lease.id);
  return {decision::probe, m.generation(), lease.id, {}};
}

void record(breaker_actor* self, const call_outcome& out) {
  auto& st = self->state;
  auto& m = *st.machine;
  auto now = self->clock().now();
  if (m.state() == breaker_state::half_open) {
    // Only a live lease's holder speaks for the probe; a lapsed probe's late
    // outcome (same generation, lease gone) is ignored.
    auto i = find_lease(self, out.lease);
    if (out.lease == 0 || i == st.leases.end() ||
        out.generation != m.generation())
      return;
    drop_lease(self, i);
  }
  auto cls = m.classify(out.kind);
  bool current = out.generation == m.generation();
  if (cls != policy::outcome_class::ignored) {
    bool was_held = m.held();
    std::function<bool()> may_open;
    if (st.ejections)
      may_open = [&st] {
        return st.ejections->with(
            [](policy::ejection_ledger& l, const std::string& s) {
              return l.try_eject(s);
            },
            true);
      };
    announce_if(self,
                m.record(out.generation, cls == policy::outcome_class::failure,
                         out.elapsed, now, may_open));
    // Held past an ejection limit, and the failures stopped: in service
    // for good again.
    if (was_held && !m.held() && m.state() == breaker_state::closed)
      st.ejections->with([](policy::ejection_ledger& l,
                            const std::string& s) { l.restored(s); });
  }
  // The upstream's "not before" (Retry-After on a 503): it opens the breaker
  // if the outcome is current, and extends an open period whatever the
  // outcome's generation, since extending moves no state and a later
  // instant must win over an earlier one.
  // Opening a closed breaker so is an ejection like any: past a route's
  // limit it stays closed (the call's own backoff still honours the hint).
  if (m.config().open_on_retry_after && cls == policy::outcome_class::failure &&
      out.retry_after && (current || m.state() == breaker_state::open)) {
    if (m.state() == breaker_state::closed && st.ejections &&
        !st.ejections->with(
            [&](policy::ejection_ledger& l, const std::string& s) {
              if (l.try_eject(s))
                return true;
              // Refused: held only while the window itself calls for
              // opening (a single hinted failure leaves no mark nothing
              // would clear).
              if (!m.held())
                l.restored(s);
              return false;
            },
            true))
      return;
    announce_if(self, m.hold_open_until(*out.retry_after, now));
  }
}

caf::behavior
breaker_behavior(breaker_actor* self, std::string source,
                 policy::breaker_config cfg,
                 std::shared_ptr<policy::breaker_mirror> mirror,
                 std::shared_ptr<shared_ejections::seat> ejections) {
  auto& st = self->state;
  st.source = std::move(source);
  st.ejections = std::move(ejections);
  st.machine.emplace(cfg);
  st.mirror = std::move(mirror);
  st.mirror->publish(st.machine->state(), st.machine->generation());
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    // A probe holder that died frees its lease at once.
    st.leases.erase(std::remove_if(st.leases.begin(), st.leases.end(),
                                   [&](const probe_lease& l) {
                                     return l.holder == dm.source;
                                   }),
                    st.leases.end());
    // A dead subscriber is dropped.
    st.subscribers.erase(std::remove_if(st.subscribers.begin(),
                                        st.subscribers.end(),
                                        [&](const caf::actor& s) {
                                          return s.address() == dm.source;
                                        }),
                         st.subscribers.end());
  });
  return {
      [self](allow_atom) { return allow(self); },
      [self](record_atom, const call_outcome& out) { record(self, out); },
      [self](half_open_atom, uint64_t generation) {
        auto& m = *self->state.machine;
        if (generation != m.generation() || m.state() != breaker_state::open ||
            m.isolated())
          return; // stale: the breaker moved on (or waits for a reset)
        auto now = self->clock().now();
        if (deadline_passed(m.open_until(), now))
          open_elapsed(self, now);
        else // the open period was extended ("open until" a later instant)
          self->delayed_send(self, m.open_until() - now, half_open_atom_v,
                             generation);
      },
      [self](probe_gate_atom, const caf::actor& relay) {
        self->state.probe_gate = relay;
      },
      [self](lease_expire_atom, lease_id id) {
        auto i = find_lease(self, id);
        if (i != self->state.leases.end())
          drop_lease(self, i);
      },
      [self](subscribe_atom) -> breaker_status {
        auto sender = caf::actor_cast<caf::actor>(self->current_sender());
        auto& subs = self->state.subscribers;
        // Subscribing twice still delivers each event once.
        if (sender && !self->state.retired &&
            std::find(subs.begin(), subs.end(), sender) == subs.end()) {
          self->monitor(sender);
          subs.push_back(std::move(sender));
        }
        return status_of(self);
      },
      // Operator actions; the answer is the state they left.
      [self](isolate_atom) -> breaker_status {
        announce_if(self, self->state.machine->isolate(self->clock().now()));
        return status_of(self);
      },
      [self](reset_atom) -> breaker_status {
        auto& st = self->state;
        announce_if(self, st.machine->reset(self->clock().now()));
        // A closed breaker held past an ejection limit is reset too.
        if (st.ejections)
          st.ejections->with([](policy::ejection_ledger& l,
                                const std::string& s) { l.restored(s); });
        return status_of(self);
      },
      // Another node's verdict on the same source (see
      // actors/breaker_relay.hpp): open for its remaining period, or close.
      [self](peer_state_atom, breaker_state to, duration open_for) {
        auto& m = *self->state.machine;
        auto now = self->clock().now();
        std::optional<policy::breaker_transition> t;
        // Capped before adding: a peer's period is bounded like a
        // server's instant, and `now + duration::max()` would overflow.
        if (to == breaker_state::open && !m.isolated())
          t = m.hold_open_until(now + std::clamp(open_for, duration::zero(),
                                                 m.config().open_duration_max),
                                now);
        else if (to == breaker_state::closed)
          t = m.close_from_peer(now);
        if (t)
          announce(self, *t, true);
      },
      [self](status_atom) { return status_of(self); },
      // Work from `reconfigure_breaker` (only that sends a breaker a thunk).
      [self](actor_thunk& t) { t.run(self); },
  };
}

} // namespace

void retire_breaker(const caf::actor& breaker) {
  caf::anon_send(breaker, actor_thunk{[](caf::local_actor* p) {
                   auto self = static_cast<breaker_actor*>(p);
                   auto& st = self->state;
                   for (auto& s : st.subscribers)
                     self->demonitor(s);
                   st.subscribers.clear();
                   st.probe_gate = caf::actor{};
                   st.retired = true;
                 }});
}

void reconfigure_breaker(const caf::actor& breaker,
                         const policy::breaker_config& cfg) {
  policy::validate(cfg);
  caf::anon_send(breaker, actor_thunk{[cfg](caf::local_actor* p) {
                   auto self = static_cast<breaker_actor*>(p);
                   auto& st = self->state;
                   bool was_held = st.machine->held();
                   st.machine->reconfigure(cfg);
                   // A held breaker's window is gone with its samples: in
                   // service for good again, as after any window that no
                   // longer calls for opening.
                   if (was_held && st.ejections)
                     st.ejections->with(
                         [](policy::ejection_ledger& l, const std::string& s) {
                           l.restored(s);
                         });
                 }});
}

breaker_handle spawn_breaker(caf::actor_system& sys, std::string source,
                             const policy::breaker_config& cfg,
                             std::shared_ptr<shared_ejections> ejections) {
  policy::validate(cfg); // refuse nonsense here, not inside the actor
  auto mirror = std::make_shared<policy::breaker_mirror>();
  std::shared_ptr<shared_ejections::seat> seat;
  if (ejections)
    seat = std::make_shared<shared_ejections::seat>(std::move(ejections),
                                                    source);
  auto actor = sys.spawn(breaker_behavior, source, cfg, mirror, seat);
  return {std::move(source), std::move(actor), std::move(mirror),
          std::move(seat)};
}

} // namespace sluice
