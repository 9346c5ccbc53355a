#include "sluice/actors/governor/state.hpp"

#include <algorithm>
#include <exception>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>

#include "sluice/actors/attempt_runner.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/payload.hpp"
#include "sluice/actors/usage.hpp"
#include "sluice/messages/atoms.hpp"

namespace sluice::governing {

running_attempt* find_running(governor_state& st, uint64_t seq) {
  for (auto& a : st.running)
    if (a.seq == seq)
      return &a;
  return nullptr;
}

// Returns a source permit, silently: after a real attempt the outcome goes
// to the gate, which then wakes governors waiting for this source; a permit
// only held while asking the breaker or the quota must not wake them --
// that would wake this very governor over and over while it finds nothing
// (a livelock).
void release_source_permit(governor_actor* self, size_t idx, permit_id id) {
  auto& src = self->state.route().sources[idx];
  release_permit(self, *src.tier, src.gate, id);
}

bool is_timeout(const caf::error& err) {
  return err.category() == caf::atom("system") &&
         err.code() == static_cast<uint8_t>(caf::sec::request_timeout);
}

// Whether attempt `seq` is still out.
bool is_current(const governor_state& st, uint64_t seq) {
  return std::any_of(st.running.begin(), st.running.end(),
                     [seq](const running_attempt& a) { return a.seq == seq; });
}

// Stops attempt `a` upstream without its answer: a runner is killed (the
// source sees its requester terminate), a direct attempt closed, a
// self-timed source told to cancel.
void stop_attempt(governor_actor* self, running_attempt& a) {
  if (a.direct_id != 0) {
    a.cancel_direct();
  } else if (a.runner) {
    self->unlink_from(a.runner);
    self->send_exit(a.runner, caf::exit_reason::kill);
  } else {
    const auto& src = self->state.route().sources[a.source];
    self->send(caf::actor_cast<caf::actor>(src.actor), cancel_atom_v);
  }
}

// Hedging: the attempts still out other than `keep` (0: all) lost -- the
// call has its answer, or its stream's first bytes came from `keep`. Each
// is stopped upstream, its permit returned, its time kept productive, and
// it is listed in the call's attempts as cancelled. Its breaker hears
// nothing: an attempt cut short is no verdict on the source.
void cancel_others(governor_actor* self, uint64_t keep) {
  auto& st = self->state;
  if (st.running.empty())
    return;
  auto now = self->clock().now();
  running_list kept;
  for (auto& a : st.running) {
    if (a.seq == keep) {
      kept.push_back(std::move(a));
      continue;
    }
    stop_attempt(self, a);
    const auto& src = st.route().sources[a.source];
    release_source_permit(self, a.source, a.permit);
    // The freed permit may let a waiting governor go; an unused probe
    // lease goes back to its breaker at once (not when we terminate).
    self->send(src.gate, wake_atom_v);
    if (a.verdict.lease != 0)
      self->send(src.breaker.actor, lease_expire_atom_v, a.verdict.lease);
    if (st.clock)
      st.clock->end_attempt(a.clock_id, now, false);
    attempt_record r{st.route().sources[a.source].name, outcome_kind::transient,
                     0, now - a.started, a.hedge};
    r.cancelled = true;
    st.attempts.push_back(std::move(r));
  }
  st.running = std::move(kept);
}

// The attempt ends without the source's answer (timed out, or its runner
// failed): stop it. A runner is killed (the source sees its requester
// terminate); a self-timed source is told to cancel.
void abandon_attempt(governor_actor* self, uint64_t seq, outcome_kind kind,
                     std::string reason) {
  auto cur = find_running(self->state, seq);
  if (cur == nullptr)
    return;
  stop_attempt(self, *cur);
  source_reply r;
  r.kind = kind;
  r.reason = std::move(reason);
  on_outcome(self, seq, std::move(r));
}

// The TTFT timer of a streamed attempt. Not a `delayed_send`: in CAF 0.17
// the clock holds a strong reference to a delayed message's receiver, so a
// finished governor would stay in memory until its TTFT passed (tens of
// seconds per streamed call). A request to itself that it never answers
// times out at the same instant instead, and CAF drops request timeouts
// when the actor terminates.
void arm_first_byte_timer(governor_actor* self, duration ttft, uint64_t tag) {
  self->request(caf::actor_cast<caf::actor>(self), ttft, first_byte_atom_v, tag)
      .then([] {},
            [self, tag](caf::error& err) {
              auto& st = self->state;
              // tag == the attempt's seq (streamed calls)
              if (is_timeout(err) && is_current(st, tag) &&
                  !st.retry.committed())
                abandon_attempt(self, tag, outcome_kind::timeout,
                                "timeout: first byte (ttft_timeout_s)");
            });
}

// What an attempt's request resolves to: the source's answer, or a failure
// that ends the attempt without one.
template <class Request>
void await_answer(governor_actor* self, Request&& request, uint64_t seq) {
  std::forward<Request>(request).then(
      [self, seq](source_reply& reply) {
        on_outcome(self, seq, std::move(reply));
      },
      [self, seq](caf::error& err) {
        if (is_timeout(err))
          abandon_attempt(self, seq, outcome_kind::timeout,
                          "timeout: attempt (timeout_s)");
        else
          abandon_attempt(self, seq, outcome_kind::transient,
                          "source: ended without an answer");
      });
}

// On the loops, a built-in source's attempt runs on this loop and its
// answer comes straight back: no message through the shared source actor,
// no hop to the loop that actor runs on. False when the source cannot run
// it here (the caller asks the source's actor); true when it started, or
// failed to start and that outcome was taken.
bool start_direct(governor_actor* self, const source_handle& src,
                  call_request& request, uint64_t seq) {
  auto direct = src.direct.lock();
  if (!direct)
    return false;
  auto me = caf::actor_cast<caf::actor_addr>(self);
  uint64_t id = 0;
  try {
    id = direct->start(request, [me, seq](source_reply r) {
      if (auto g = caf::actor_cast<caf::actor>(me))
        caf::anon_send(g, direct_done_atom_v, seq, std::move(r));
    });
  } catch (const std::exception& e) {
    // No memory to start it: nothing went upstream; a failed attempt.
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "governor: starting an attempt at {} failed: {}", src.name,
                e.what());
    source_reply r;
    r.kind = outcome_kind::transient;
    on_outcome(self, seq, std::move(r));
    return true;
  }
  if (id == 0)
    return false;
  auto cur = find_running(self->state, seq);
  cur->direct_id = id;
  cur->direct = direct;
  return true;
}

uint64_t call_tokens(governor_state& st, const source_headroom& room) {
  if (st.request.tokens == 0 && room.seen_limits()) {
    estimate_rules rules;
    st.request.tokens = std::max<uint64_t>(
        1, estimate_request(st.request.payload, rules).total());
  }
  // A caller's figure (or a remote one's, off the wire) is bounded as
  // the upstream's own are.
  return std::min(st.request.tokens, policy::provider_count_saturation);
}

void start_attempt(governor_actor* self, size_t idx, permit_id permit,
                   const breaker_verdict& verdict, bool hedge,
                   uint64_t tokens) {
  auto& st = self->state;
  const auto& src = st.route().sources[idx];
  auto seq = ++st.attempt_seq;
  auto request = st.request;
  if (src.model_names && !request.model.empty())
    if (auto i = src.model_names->find(request.model);
        i != src.model_names->end())
      request.payload = with_model(request.payload, i->second);
  auto tag = uint64_t{0};
  if (request.stream) {
    // The source streams to us; we pass the current attempt's bytes on.
    tag = seq;
    request.stream_to = caf::actor_cast<caf::actor>(self);
    request.stream_tag = tag;
  }
  auto now = self->clock().now();
  if (st.phase != governor_phase::attempting) // a hedge joins one under way
    enter(self, governor_phase::attempting);
  running_attempt a{seq, idx, permit, verdict, now, {}, tag, 0, {}};
  a.clock_id = st.clock->begin_attempt(now);
  a.hedge = hedge;
  if (src.headroom)
    a.room = headroom_hold{src.headroom, src.headroom->sent(tokens, now)};
  if (hedge)
    st.retry.hedge_started();
  st.running.push_back(std::move(a));
  arm_hedge_timer(self, seq);
  auto limit = st.policy().attempt_timeout;
  if (auto ttft = st.policy().ttft_timeout) {
    if (tag != 0) // streamed: the first chunk must come within the TTFT
      arm_first_byte_timer(self, *ttft, tag);
    else // unary: the first byte is the whole answer
      limit = std::min(limit, *ttft);
  }
  if (src.self_timed) {
    // The source answers `timeout` itself: no runner, no clock timer.
    request.timeout = limit;
    if (start_direct(self, src, request, seq))
      return;
    await_answer(self,
                 self->request(src.actor, caf::infinite, attempt_atom_v,
                               std::move(request)),
                 seq);
    return;
  }
  auto runner =
      self->spawn<caf::linked>(attempt_runner, src.actor, std::move(request));
  find_running(st, seq)->runner = runner;
  await_answer(self, self->request(runner, limit, run_atom_v), seq);
}

} // namespace sluice::governing
