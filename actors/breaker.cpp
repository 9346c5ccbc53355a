#include "sluice/actors/breaker.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/breaker/probe_leases.hpp"

namespace sluice {

namespace {

struct breaker_actor_state {
  std::string source;
  std::optional<policy::breaker_policy> machine;
  std::shared_ptr<policy::breaker_mirror> mirror;
  /// Half-open probe leases and the cluster claim.
  policy::probe_leases leases;
  /// The lease holders, by actor id (monitored while they hold one).
  std::unordered_map<uint64_t, caf::actor_addr> holders;
  std::vector<caf::actor> subscribers;
  /// Shared with other nodes: the cluster's probe lease is claimed through
  /// this relay before each half-open (none: decide alone).
  caf::actor probe_gate;
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

// Stops observing a lease holder unless it still holds a lease or
// subscribes: CAF 0.17's `demonitor` removes every monitor of an actor at
// once, not one.
void forget_holder(breaker_actor* self, uint64_t holder) {
  auto& st = self->state;
  if (st.leases.holds(holder))
    return;
  auto i = st.holders.find(holder);
  if (i == st.holders.end())
    return;
  bool subscribed =
      std::any_of(st.subscribers.begin(), st.subscribers.end(),
                  [&](const caf::actor& s) { return s.address() == i->second; });
  if (!subscribed)
    self->demonitor(i->second);
  st.holders.erase(i);
}

void release_lease(breaker_actor* self, uint64_t id) {
  if (auto holder = self->state.leases.release(id))
    forget_holder(self, *holder);
}

// The routes' ejection limit, asked before the breaker's own failures open
// it (none: always).
std::function<bool()> may_eject(breaker_actor* self) {
  auto& st = self->state;
  if (!st.ejections)
    return {};
  return [&st] {
    return st.ejections->with(
        [](policy::ejection_ledger& l, const std::string& s) {
          return l.try_eject(s);
        },
        true);
  };
}

// The one place the ledger hears of this breaker's steps.
void apply_ejection(breaker_actor* self, policy::ejection_action a) {
  auto& st = self->state;
  if (!st.ejections || a == policy::ejection_action::none)
    return;
  st.ejections->with([a](policy::ejection_ledger& l, const std::string& s) {
    if (a == policy::ejection_action::restore)
      l.restored(s);
    else
      l.ejected(s);
  });
}

// Makes a step visible: mirror first (after the authoritative state,
// release ordering), then the ledger, timers and leases, then subscribers
// in order.
void take_step(breaker_actor* self, const policy::breaker_step& step,
               bool from_peer = false) {
  auto& st = self->state;
  if (!step.transition) {
    apply_ejection(self, step.ejection);
    return;
  }
  auto& t = *step.transition;
  st.mirror->publish(t.to, t.generation);
  apply_ejection(self, step.ejection);
  if (t.from == breaker_state::half_open)
    for (auto holder : st.leases.clear())
      forget_holder(self, holder);
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

void take_step(breaker_actor* self,
               const std::optional<policy::breaker_transition>& t,
               bool from_peer = false) {
  take_step(self, policy::breaker_step::of(t), from_peer);
}

void on_claim(breaker_actor* self, uint64_t generation, duration left);

// Asks the relay for the cluster's probe lease: one claim per generation
// at a time.
void claim(breaker_actor* self) {
  auto& st = self->state;
  auto generation = st.machine->generation();
  if (!st.leases.should_claim(generation))
    return;
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
    take_step(self, m.on_open_elapsed(now));
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
  auto& m = *self->state.machine;
  auto now = self->clock().now();
  auto v = self->state.leases.on_claim(generation, left, now, m);
  switch (v.what) {
  case policy::claim_verdict::action::ignore:
    return;
  case policy::claim_verdict::action::half_open:
    if (auto t = m.on_open_elapsed(now))
      take_step(self, t);
    else
      rearm(self, now); // extended while the claim was out
    return;
  case policy::claim_verdict::action::hold_until:
    // Another node probes: stay open until its lease ends (its verdict,
    // relayed, usually comes first), then claim again. Extending an open
    // breaker is not published: this node decided nothing.
    if (m.state() == breaker_state::open) {
      m.hold_open_until(v.until, now);
      rearm(self, now);
    } else {
      take_step(self, m.hold_open_until(v.until, now), true);
    }
    return;
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
  auto sender = self->current_sender();
  std::optional<uint64_t> holder;
  if (sender != nullptr)
    holder = sender->id();
  auto& cfg = m.config();
  auto g = st.leases.try_grant(holder, now, cfg.half_open_probes,
                               cfg.open_duration, st.probe_gate != nullptr);
  switch (g.what) {
  case policy::probe_grant::verdict::claim_first:
    claim(self);
    return {decision::rejected, m.generation(), 0, g.retry_at};
  case policy::probe_grant::verdict::refused:
    return {decision::rejected, m.generation(), 0, g.retry_at};
  case policy::probe_grant::verdict::granted:
    break;
  }
  // A holder that dies frees its lease at once (monitor); a hung one's
  // lapses by its timer.
  auto addr = caf::actor_cast<caf::actor_addr>(sender);
  if (st.holders.emplace(*holder, addr).second)
    self->monitor(addr);
  self->delayed_send(self, cfg.open_duration, lease_expire_atom_v, g.lease.id);
  return {decision::probe, m.generation(), g.lease.id, {}};
}

void record(breaker_actor* self, const call_outcome& out) {
  auto& st = self->state;
  auto& m = *st.machine;
  if (m.state() == breaker_state::half_open) {
    // Only a live lease's holder speaks for the probe; a lapsed probe's late
    // outcome (same generation, lease gone) is ignored.
    if (out.lease == 0 || st.leases.find(out.lease) == nullptr ||
        out.generation != m.generation())
      return;
    release_lease(self, out.lease);
  }
  take_step(self, m.on_outcome(out.generation, m.classify(out.kind),
                               out.elapsed, out.retry_after,
                               self->clock().now(), may_eject(self)));
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
    st.leases.drop_holder(dm.source.id());
    st.holders.erase(dm.source.id());
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
      [self](lease_expire_atom, lease_id id) { release_lease(self, id); },
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
        take_step(self, self->state.machine->isolate(self->clock().now()));
        return status_of(self);
      },
      [self](reset_atom) -> breaker_status {
        take_step(self, self->state.machine->reset_step(self->clock().now()));
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
        take_step(self, t, true);
      },
      [self](status_atom) { return status_of(self); },
      [self](retire_atom) {
        auto& st = self->state;
        for (auto& s : st.subscribers)
          if (!st.holders.count(s->id()))
            self->demonitor(s);
        st.subscribers.clear();
        st.probe_gate = caf::actor{};
        st.retired = true;
      },
      [self](const breaker_settings& s) {
        auto& m = *self->state.machine;
        // A held breaker's window is gone with its samples: in service for
        // good again, as after any window that no longer calls for opening.
        take_step(self, policy::breaker_step{std::nullopt,
                                             m.reconfigure(s.config)});
      },
  };
}

} // namespace

void retire_breaker(const caf::actor& breaker) {
  caf::anon_send(breaker, retire_atom_v);
}

void reconfigure_breaker(const caf::actor& breaker,
                         const policy::breaker_config& cfg) {
  policy::validate(cfg);
  caf::anon_send(breaker, breaker_settings{cfg});
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
