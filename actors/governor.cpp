#include "sluice/actors/governor.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/call_results.hpp"
#include "sluice/actors/governor/state.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/call/governor_phase.hpp"
#include "sluice/runtime/policy/call/retry_state.hpp"
#include "sluice/runtime/policy/call/stall_clock.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice::governing {

namespace {

// Telemetry: tells the backend the scope progressed, at most once per
// `progress_interval` per route. Never changes the verdict, never fails
// the call.
void note_progress(governor_actor* self) {
  const auto& route = self->state.route();
  auto now = self->clock().now().time_since_epoch().count();
  auto every = policy::progress_interval(route.policy).count();
  auto last = route.last_progress->load(std::memory_order_relaxed);
  if (last != INT64_MIN && now - last < every)
    return;
  if (route.last_progress->compare_exchange_strong(last, now,
                                                   std::memory_order_relaxed))
    self->send(route.backend, progress_atom_v, route.scope);
}

} // namespace

// -- phases -------------------------------------------------------------------

// The one place the phase changes. A move outside `policy::may_enter` is a
// bug in this file: it is logged, and the governor goes on as told (the
// phase only gates early wakes and a second `call_atom`).
void enter(governor_actor* self, governor_phase to) {
  auto& st = self->state;
  if (!policy::may_enter(st.phase, to))
    logger().error("governor: phase {} -> {} is not a move of the loop",
                   policy::to_string(st.phase), policy::to_string(to));
  st.phase = to;
}

// -- ending the call ----------------------------------------------------------

void finish(governor_actor* self, call_result result) {
  auto& st = self->state;
  cancel_others(self, 0); // attempts still out lost (hedging)
  enter(self, governor_phase::finished);
  result.attempts = std::move(st.attempts);
  if (st.clock) {
    result.stalled = st.clock->stalled(self->clock().now());
    result.productive = st.clock->productive();
  }
  if (auto ticket = std::get_if<admission_ticket>(&st.admission))
    ticket->release(self);
  if (auto& x = st.extra) {
    x->retry_slot.reset();
    x->active_call.reset();
    if (!x->lease.empty())
      self->send(st.cluster, lease_release_atom_v, std::move(x->lease));
  }
  st.delivery.close(std::move(result));
  self->quit();
}

void exhausted(governor_actor* self, const char* reason,
               std::optional<duration> retry_in) {
  auto& st = self->state;
  if (!retry_in)
    retry_in = exhausted_retry_in(
        st.policy().poll_interval,
        st.extra ? st.extra->soonest_retry : std::nullopt, self->clock().now());
  // Whatever set it (an upstream's hint, a breaker opened until a hint's
  // instant, a backoff it raised): never more than the node would wait.
  finish(self, exhausted_result(
                   reason, policy::client_retry_after(st.policy(), *retry_in)));
}

// -- waiting ------------------------------------------------------------------

void sleep_for(governor_actor* self, duration d, after_sleep then) {
  auto& st = self->state;
  st.on_wake = then;
  self->delayed_send(self, d, resume_atom_v, ++st.timer_seq);
}

// Runs `then` unless the call has stalled (`policy::stall_verdict`). The
// backend is asked only when the verdict's local half holds; a backend
// fault fails closed.
void check_stall(governor_actor* self, std::function<void()> then) {
  auto& st = self->state;
  auto window = st.policy().stall_window;
  if (!policy::local_stall_exceeded(st.clock->stalled(self->clock().now()),
                                    window)) {
    then();
    return;
  }
  self->request(st.route().backend, st.route().backend_timeout,
                progress_age_atom_v, st.route().scope)
      .then(
          [self, window, then](const progress_age& age) {
            auto& st = self->state;
            auto local = st.clock->stalled(self->clock().now());
            if (policy::stall_verdict(local, age.age, window))
              exhausted(self, "stalled");
            else
              then();
          },
          [self](caf::error&) {
            finish(self,
                   backend_error_result(self->state.policy().poll_interval));
          });
}

void on_outcome(governor_actor* self, uint64_t seq, source_reply reply) {
  auto& st = self->state;
  auto it =
      std::find_if(st.running.begin(), st.running.end(),
                   [seq](const running_attempt& a) { return a.seq == seq; });
  if (it == st.running.end())
    return; // abandoned or cancelled meanwhile
  auto cur = std::move(*it);
  st.running.erase(it);
  if (st.running.empty())
    st.drop_retry_slot(); // the retry, if it was one, is over
  auto now = self->clock().now();
  const auto& pol = st.policy();
  const auto& src = st.route().sources[cur.source];
  // An attempt that does not spend the retry budget (a 429 of a kind whose
  // 429s are load) goes back to the stall account.
  bool spends = policy::spends_retry(pol, reply.kind);
  st.clock->end_attempt(cur.clock_id, now, !spends);
  auto in_flight = src.tier->load().in_use;
  release_source_permit(self, cur.source, cur.permit);
  cur.room.answered(reply.limits, now);
  // The gate adjusts the AIMD limit, then wakes governors waiting for a
  // permit of this source.
  self->send(src.gate, aimd_atom_v, reply.kind, in_flight);
  call_outcome out;
  out.generation = cur.verdict.generation;
  out.lease = cur.verdict.lease;
  out.kind = reply.kind;
  out.elapsed = now - cur.started;
  // A custom source may hand us any duration: saturate before adding, so
  // the instant cannot overflow (the breaker caps it further).
  if (reply.retry_after)
    out.retry_after = now + std::clamp(*reply.retry_after, duration::zero(),
                                       policy::retry_after_saturation);
  self->send(src.breaker.actor, record_atom_v, out);
  st.attempts.push_back(
      {src.name, reply.kind, reply.status, now - cur.started, cur.hedge});
  // A custom source's reason is bounded: it goes into the caller's error.
  st.attempts.back().reason = reply.reason.substr(0, max_attempt_reason_bytes);
  auto step = st.retry.after_outcome(pol, cur.source, reply.kind,
                                     reply.retry_after, !st.running.empty(),
                                     st.clock->stalled(now), st.rng,
                                     !reply.unsafe_to_retry);
  using action = policy::next_step::action;
  switch (step.what) {
  case action::finish:
  case action::finish_streamed:
    // The first complete answer wins; hedged attempts still out are
    // cancelled (finish) and their upstream requests closed. Streamed,
    // bytes went to the caller: this attempt is the answer, and a failure
    // ends its stream with an error.
    if (step.progressed)
      note_progress(self);
    st.attempts.back().won = true;
    finish(self, step.what == action::finish
                     ? answer_result(src.name, std::move(reply))
                     : streamed_result(src.name, std::move(reply)));
    return;
  case action::wait_for_group:
    return;
  case action::exhausted:
    exhausted(self, step.reason, step.retry_in);
    return;
  case action::back_off:
    enter(self, governor_phase::backing_off);
    sleep_for(self, step.delay,
              step.stall_check_first ? after_sleep::stall_check_then_round
                                     : after_sleep::next_round);
    return;
  }
}

// Admitted: the call counts as active on its route's retry budget until it
// finishes, then its first round.
void begin_rounds(governor_actor* self) {
  auto& st = self->state;
  if (st.route().retry_budget)
    st.more().active_call = st.route().retry_budget->call_started();
  next_round(self);
}

// The global tier across nodes, after the local tiers and under the same
// deadline: the one `admit` computed, handed on by the ticket. Redis
// failing, or the cluster tier not answering within the deadline plus the
// backend timeout, fails the call closed.
void admit_cluster(governor_actor* self) {
  auto& st = self->state;
  auto deadline = std::get<admission_ticket>(st.admission).deadline();
  auto limit = deadline - self->clock().now() + st.route().backend_timeout;
  self->request(st.cluster, limit, acquire_atom_v, deadline)
      .then(
          [self](std::string& lease) {
            self->state.more().lease = std::move(lease);
            begin_rounds(self);
          },
          [self](caf::error& err) {
            auto& st = self->state;
            if (auto tier = busy_tier(err))
              finish(self, busy_result(tier, st.wait_timeout));
            else
              finish(self, backend_error_result(st.policy().poll_interval));
          });
}

// -- the behavior -------------------------------------------------------------

// The call starts (`call_atom`, or the governor's start with
// `governor_config::start_at_once`): admission, then its rounds.
caf::result<call_result> start_call(governor_actor* self) {
  auto& st = self->state;
  enter(self, governor_phase::admitting);
  auto reply = st.delivery.open(self);
  st.clock.emplace(self->clock().now());
  // `done` replaces the path with the ticket (admit_call is through with
  // the path by then).
  const auto& path = std::get<admission_path>(st.admission);
  admit_call(
      self, path, st.wait_timeout, [self](caf::expected<admission_ticket> t) {
        auto& st = self->state;
        if (!t) {
          finish(self, busy_result(busy_tier(t.error()), st.wait_timeout));
          return;
        }
        st.admission = std::move(*t);
        if (st.cluster)
          admit_cluster(self);
        else
          begin_rounds(self);
      });
  return reply;
}

governor_actor::governor_actor(caf::actor_config& actor_cfg,
                               governor_config cfg)
    : caf::stateful_actor<governor_state>(actor_cfg) {
  auto& st = state;
  st.request = std::move(cfg.request);
  st.plan = std::move(cfg.route);
  st.cluster = std::move(cfg.cluster);
  st.wait_timeout = cfg.wait_timeout;
  st.admission = std::move(cfg.admission);
  st.rng.seed(cfg.seed);
  start_at_once_ = cfg.start_at_once && cfg.on_done;
  st.delivery.start(this, std::move(cfg.on_done), std::move(cfg.on_chunk));
}

caf::behavior governor_actor::make_behavior() {
  auto self = this;
  // Attempt runners are linked to us; their exits (normal, or the kill we
  // send on a timeout) must not take us down.
  self->set_exit_handler([](caf::exit_msg&) {});
  caf::behavior behavior{
      [self](call_atom) -> caf::result<call_result> {
        if (self->state.phase != governor_phase::idle)
          return caf::sec::invalid_argument; // one call per governor
        return start_call(self);
      },
      [self](resume_atom, uint64_t seq) {
        auto& st = self->state;
        if (seq != st.timer_seq)
          return; // stale
        if (st.on_wake == after_sleep::stall_check_then_round)
          check_stall(self, [self] { next_round(self); });
        else
          next_round(self);
      },
      [self](const breaker_event& ev) {
        if (ev.to != breaker_state::open)
          wake_early(self);
      },
      [self](freed_atom, const std::string&) { wake_early(self); },
      [self](direct_done_atom, uint64_t seq, source_reply& reply) {
        auto cur = find_running(self->state, seq);
        if (cur == nullptr)
          return; // abandoned meanwhile
        cur->direct_id = 0;
        on_outcome(self, seq, std::move(reply));
      },
      [self](stream_chunk_atom, uint64_t tag, std::string& bytes) {
        auto& st = self->state;
        // tag == the attempt's seq; chunks of an attempt that is over (or
        // lost to another) are dropped.
        if (tag == 0 || !is_current(st, tag) || bytes.empty())
          return;
        if (!st.retry.committed()) {
          // The first bytes commit the call to this attempt: no retry, no
          // failover, and hedged attempts still out are cancelled. A
          // retry that streams is no longer one in the budget's sense.
          st.retry.commit();
          cancel_others(self, tag);
          st.drop_retry_slot();
        }
        st.delivery.chunk(self, std::move(bytes));
      },
      // Our own TTFT and hedge timers: never answered.
      [](first_byte_atom, uint64_t) { return caf::delegated<void>{}; },
      [](hedge_timer_atom, uint64_t) { return caf::delegated<void>{}; },
      [self](status_atom) {
        auto& st = self->state;
        auto now = self->clock().now();
        return governor_status{
            st.clock ? st.clock->stalled(now) : duration{},
            st.clock ? st.clock->productive() : duration{}, st.retry.fails(),
            static_cast<uint32_t>(st.attempts.size()), st.phase};
      },
  };
  if (!start_at_once_)
    return behavior;
  // Become it first: a call that ends at once (quit) must find it set, not
  // have it set after its end.
  become(std::move(behavior));
  start_call(this);
  return {};
}

} // namespace sluice::governing

namespace sluice {

caf::actor spawn_governor(caf::actor_system& sys, governor_config cfg) {
  return sys.spawn<governing::governor_actor>(std::move(cfg));
}

} // namespace sluice
