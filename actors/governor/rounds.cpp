#include "sluice/actors/governor/state.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include <caf/event_based_actor.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/call/source_order.hpp"

namespace sluice::governing {

void retry_budget_spent(governor_actor* self);

// No source can take the call now: wait a jittered poll interval, or less if
// a breaker turns half-open or closed, or a source permit frees.
void wait_for_source(governor_actor* self) {
  auto& st = self->state;
  if (!st.watching) { // breaker subscriptions last for the whole call
    st.watching = true;
    for (auto& src : st.route().sources)
      self->request(src.breaker.actor, caf::infinite, subscribe_atom_v)
          .then([](const breaker_status&) {}, [](caf::error&) {});
  }
  // Permit watches are one-shot: renew them for every wait.
  for (auto& src : st.route().sources)
    self->send(src.gate, watch_atom_v);
  enter(self, governor_phase::waiting);
  auto delay = policy::poll_delay(st.policy().poll_interval, st.uniform());
  // A source out of quota has a token again at a known instant: be there.
  if (st.extra && st.extra->next_token) {
    auto until_token = *st.extra->next_token - self->clock().now();
    delay = std::max(duration::zero(), std::min(delay, until_token));
  }
  sleep_for(self, delay, after_sleep::next_round);
}

void wake_early(governor_actor* self) {
  auto& st = self->state;
  if (st.phase != governor_phase::waiting)
    return;
  ++st.timer_seq; // the poll timer is stale now
  next_round(self);
}

// -- selection ----------------------------------------------------------------

// Tries the sources of `order` from the `i`th on. A hedge (`hedge`) skips
// sources with an attempt out, and finding none just goes without: the
// attempt under way goes on, nothing waits.
// `hedge_for`: the attempt a hedge is for (0: an ordinary round).
bool running_at(const governor_state& st, size_t idx) {
  return std::any_of(st.running.begin(), st.running.end(),
                     [idx](auto& a) { return a.source == idx; });
}

// Whether the call may (still) hedge attempt `seq`: the one predicate,
// asked when the attempt starts, when its hedge timer fires and when the
// hedge's breaker answers.
bool may_hedge(const governor_state& st, uint64_t seq) {
  return st.retry.may_hedge(st.policy(), st.phase == governor_phase::attempting,
                            is_current(st, seq));
}

// A hedge whose moment passed while its breaker answered: it may no longer
// hedge (the attempt it was for is over, the stream began), or another
// attempt took that source meanwhile.
bool stale_hedge(const governor_state& st, uint64_t hedge_for, size_t idx) {
  return !may_hedge(st, hedge_for) || running_at(st, idx);
}

void try_candidate(governor_actor* self, std::vector<size_t> order, size_t i,
                   uint64_t hedge_for = 0) {
  bool hedge = hedge_for != 0;
  auto& st = self->state;
  // A source skipped at once (breaker open, tier full, no quota token) is
  // the loop's next turn, not a call: a 1,000-source route was 1,000 stack
  // frames deep. Only the breaker's answer comes back in a new turn.
  for (; i < order.size(); ++i) {
    auto idx = order[i];
    const auto& src = st.route().sources[idx];
    if (hedge && running_at(st, idx))
      continue;
    // The mirror skips an open breaker without a message.
    if (src.breaker.is_open() || !src.tier->try_acquire())
      continue;
    auto permit = src.tier->next_permit_id();
    attach_permit(self, src.tier, src.gate, permit);
    // A round after a failed attempt is a retry: once a source could take
    // it, it needs the route budget's slot (a hedge does not).
    if (policy::retry_state::needs_retry_slot(
            st.route().retry_budget != nullptr, !st.attempts.empty(), hedge,
            st.holds_retry_slot())) {
      auto& slot = st.more().retry_slot;
      slot = st.route().retry_budget->try_retry();
      if (!slot) {
        release_source_permit(self, idx, permit);
        retry_budget_spent(self);
        return;
      }
    }
    auto seen = src.breaker.mirror->load();
    // Rate quota: a token per attempt. Taken before the breaker's answer,
    // so a rejected attempt spends a token (conservative: never over the
    // rate).
    // The upstream's own limits, as its answers said: a call they cannot
    // cover waits for their reset (stall time, as for the quota) or goes
    // to another source. Checked before the quota's token is spent; the
    // call counts against them once it is sent.
    uint64_t tokens = 0;
    if (src.headroom) {
      auto now = self->clock().now();
      tokens = call_tokens(st, *src.headroom);
      auto v = src.headroom->check(tokens, now);
      if (!v.go) {
        auto& x = st.more();
        if (!x.next_token || v.not_before < *x.next_token)
          x.next_token = v.not_before;
        release_source_permit(self, idx, permit);
        continue;
      }
    }
    if (src.quota) {
      auto now = self->clock().now();
      if (!src.quota->try_take(now)) {
        auto next = src.quota->next_token(now);
        auto& x = st.more();
        if (!x.next_token || next < *x.next_token)
          x.next_token = next;
        release_source_permit(self, idx, permit);
        continue;
      }
    }
    // Closed: go under the generation the mirror shows, without asking the
    // breaker. Had it moved on meanwhile, the outcome is recorded under an
    // earlier generation and ignored -- as for any call admitted just
    // before a transition. Half-open needs the breaker (probe leases).
    if (seen.state == breaker_state::closed) {
      breaker_verdict go;
      go.what = breaker_verdict::decision::go;
      go.generation = seen.generation;
      start_attempt(self, idx, permit, go, hedge, tokens);
      return;
    }
    // The round goes on with the rest of the order when the breaker
    // answers: one of the two handlers runs, once, and takes it.
    auto rest = std::make_shared<std::vector<size_t>>(std::move(order));
    self->request(src.breaker.actor, caf::infinite, allow_atom_v)
        .then(
            [self, rest, i, idx, permit, hedge_for, hedge,
             tokens](const breaker_verdict& v) {
              auto& st = self->state;
              if (hedge && stale_hedge(st, hedge_for, idx)) {
                release_source_permit(self, idx, permit);
                if (v.lease != 0) // an unused probe lease goes back
                  self->send(st.route().sources[idx].breaker.actor,
                             lease_expire_atom_v, v.lease);
                return;
              }
              if (v.may_go()) {
                start_attempt(self, idx, permit, v, hedge, tokens);
                return;
              }
              auto& x = st.more();
              if (!x.soonest_retry || v.retry_at < *x.soonest_retry)
                x.soonest_retry = v.retry_at;
              release_source_permit(self, idx, permit);
              try_candidate(self, std::move(*rest), i + 1, hedge_for);
            },
            [self, rest, i, idx, permit, hedge_for](caf::error&) {
              release_source_permit(self, idx, permit);
              if (hedge_for != 0 && stale_hedge(self->state, hedge_for, idx))
                return;
              try_candidate(self, std::move(*rest), i + 1, hedge_for);
            });
    return;
  }
  if (hedge)
    return; // no other source free now: no hedge
  // No attempt this round: a retry slot is not held while waiting.
  st.drop_retry_slot();
  check_stall(self, [self] { wait_for_source(self); });
}

// The route's retry budget has no retry for this call now (SPEC §3 with
// issue 17): end it, or wait a poll interval -- unproductive time, judged
// by the stall check like any wait -- and ask again.
void retry_budget_spent(governor_actor* self) {
  auto& st = self->state;
  // A wait of its route's own making: judged by the call's stall time
  // alone (the scope progressing -- other calls succeeding -- must not keep
  // it waiting for ever).
  if (policy::retry_state::ends_when_budget_spent(
          st.route().retry_budget->config().when_spent,
          st.clock->stalled(self->clock().now()), st.policy().stall_window)) {
    exhausted(self, "retry_budget");
    return;
  }
  enter(self, governor_phase::waiting);
  sleep_for(self, policy::poll_delay(st.policy().poll_interval, st.uniform()),
            after_sleep::next_round);
}

// An attempt still out after the kind's `hedge_after` with no first byte
// (no answer; for a stream, no chunk): start one more on another runnable
// source, up to `max_hedged` per call. Both run; the first complete answer
// wins (on_outcome), the first chunk of a stream commits to its attempt.
void hedge(governor_actor* self, uint64_t seq) {
  auto& st = self->state;
  if (!may_hedge(st, seq))
    return;
  const auto& route = st.route();
  auto order = policy::source_order(route.sources.size(), route.weights,
                                    st.retry.last_failed(), st.rng);
  try_candidate(self, std::move(order), 0, seq);
}

// Arms attempt `seq`'s hedge timer, if the kind hedges and may still. A
// request to itself that times out, as the TTFT timer (no strong
// reference from the clock).
void arm_hedge_timer(governor_actor* self, uint64_t seq) {
  auto& st = self->state;
  if (!may_hedge(st, seq))
    return;
  self->request(caf::actor_cast<caf::actor>(self), *st.policy().hedge_after,
                hedge_timer_atom_v, seq)
      .then([] {},
            [self, seq](caf::error& err) {
              if (is_timeout(err))
                hedge(self, seq);
            });
}

void next_round(governor_actor* self) {
  auto& st = self->state;
  enter(self, governor_phase::choosing);
  if (auto& x = st.extra) {
    x->soonest_retry.reset();
    x->next_token.reset();
  }
  const auto& route = st.route();
  auto order = policy::source_order(route.sources.size(), route.weights,
                                    st.retry.last_failed(), st.rng);
  try_candidate(self, std::move(order), 0);
}

} // namespace sluice::governing
