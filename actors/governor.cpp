#include "sluice/actors/governor.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/attempt_runner.hpp"
#include "sluice/actors/call_delivery.hpp"
#include "sluice/actors/call_results.hpp"
#include "sluice/actors/direct_attempts.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/payload.hpp"
#include "sluice/actors/permit.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/governor_phase.hpp"
#include "sluice/runtime/policy/http_outcome.hpp"
#include "sluice/runtime/policy/rng.hpp"
#include "sluice/runtime/policy/source_order.hpp"
#include "sluice/runtime/policy/stall_clock.hpp"

namespace sluice {

namespace {

using policy::governor_phase;
using policy::outcome_kind;

// -- the governor's state -----------------------------------------------------

struct running_attempt {
  /// Tells this attempt's answer from a late one of an abandoned attempt.
  uint64_t seq = 0;
  size_t source = 0;
  permit_id permit = 0;
  breaker_verdict verdict;
  time_point started{};
  /// The runner of an attempt at a source that is not self-timed (else
  /// null: the governor asked the source itself).
  caf::actor runner;
  /// Tags this attempt's stream chunks (streamed calls; 0: unary).
  uint64_t tag = 0;
  /// An attempt the governor started itself at a built-in source on its
  /// own loop (`direct_attempts`): its id there (0: asked by message).
  uint64_t direct_id = 0;
  std::weak_ptr<direct_attempts> direct;

  /// Closes a direct attempt upstream (it was abandoned, or the governor
  /// terminates with it in flight).
  void cancel_direct() noexcept {
    if (direct_id == 0)
      return;
    if (auto d = direct.lock())
      d->cancel(direct_id);
    direct_id = 0;
  }
};

/// The answer to an attempt started directly, sent by the source's client
/// to the governor: (direct_done, attempt seq, source_reply).
using direct_done_atom = caf::atom_constant<caf::atom("dirdone")>;

// What a backoff or poll timer does when it fires.
enum class after_sleep { next_round, stall_check_then_round };

struct governor_state {
  governor_config cfg;
  /// The promise form or the callback form (`cfg.on_done`).
  std::unique_ptr<call_delivery> delivery;
  /// Changed only by `enter`.
  governor_phase phase = governor_phase::idle;
  std::optional<policy::stall_clock> clock;
  admission_ticket ticket;
  uint32_t fails = 0;
  std::vector<attempt_record> attempts;
  policy::small_rng rng;
  /// The source of the last failed attempt: tried last next round.
  std::optional<size_t> last_failed;
  std::optional<running_attempt> current;
  /// Only the latest timer counts; earlier ones are stale.
  uint64_t timer_seq = 0;
  after_sleep on_wake = after_sleep::next_round;
  bool watching = false;
  /// Earliest instant a rejecting breaker named in the last round.
  std::optional<time_point> soonest_retry;
  /// Earliest instant a source out of quota has a token again (last round).
  std::optional<time_point> next_token;
  /// Sequence number of the latest attempt; answers and chunks of earlier
  /// attempts are dropped.
  uint64_t attempt_seq = 0;
  /// A chunk went to the caller: no retry or failover from here on.
  bool committed = false;
  /// The cluster lease this call holds, if any.
  std::string lease;
  /// With the route's retry budget: this call counted active (from
  /// admission), and the retry slot of the round or attempt under way.
  policy::retry_budget::hold active_call;
  policy::retry_budget::hold retry_slot;

  static inline const char* name = "sluice.governor";

  /// Runs when the governor terminates, killed or not (CAF destroys the
  /// state as it finalizes the actor, before its cleanup): an attempt
  /// still in flight that the governor started itself has no actor
  /// watching it -- cancellation is this. (An actor the scheduler releases
  /// at its stop is not finalized; its attempt then ends with the loops.)
  ~governor_state() {
    if (current)
      current->cancel_direct();
  }

  const route_plan& route() const { return *cfg.route; }

  const policy::call_policy& policy() const { return cfg.route->policy; }

  double uniform() { return rng.uniform(); }
};

using governor_actor = caf::stateful_actor<governor_state>;

void next_round(governor_actor* self);

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
  enter(self, governor_phase::finished);
  result.attempts = std::move(st.attempts);
  if (st.clock) {
    result.stalled = st.clock->stalled(self->clock().now());
    result.productive = st.clock->productive();
  }
  st.ticket.release(self);
  st.retry_slot.reset();
  st.active_call.reset();
  if (!st.lease.empty())
    self->send(st.cfg.cluster, lease_release_atom_v, std::move(st.lease));
  st.delivery->close(std::move(result));
  self->quit();
}

void exhausted(governor_actor* self, const char* reason,
               std::optional<duration> retry_in = std::nullopt) {
  auto& st = self->state;
  if (!retry_in)
    retry_in = exhausted_retry_in(st.policy().poll_interval, st.soonest_retry,
                                  self->clock().now());
  finish(self, exhausted_result(reason, *retry_in));
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
  if (st.next_token) {
    auto until_token = *st.next_token - self->clock().now();
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

// -- attempts -----------------------------------------------------------------

// Returns a source permit, silently: after a real attempt the outcome goes
// to the gate, which then wakes governors waiting for this source; a permit
// only held while asking the breaker or the quota must not wake them --
// that would wake this very governor over and over while it finds nothing
// (a livelock).
void release_source_permit(governor_actor* self, size_t idx, permit_id id) {
  auto& src = self->state.route().sources[idx];
  release_permit(self, *src.tier, src.gate, id);
}

// Telemetry: tells the backend the scope progressed, at most once per
// `progress_interval` per route. Never changes the verdict, never fails
// the call.
void note_progress(governor_actor* self) {
  const auto& route = self->state.route();
  auto now = self->clock().now().time_since_epoch().count();
  auto every = progress_interval(route.policy).count();
  auto last = route.last_progress->load(std::memory_order_relaxed);
  if (last != INT64_MIN && now - last < every)
    return;
  if (route.last_progress->compare_exchange_strong(last, now,
                                                   std::memory_order_relaxed))
    self->send(route.backend, progress_atom_v, route.scope);
}

bool is_timeout(const caf::error& err) {
  return err.category() == caf::atom("system") &&
         err.code() == static_cast<uint8_t>(caf::sec::request_timeout);
}

void on_outcome(governor_actor* self, source_reply reply) {
  auto& st = self->state;
  auto cur = std::move(*st.current);
  st.current.reset();
  st.retry_slot.reset(); // the retry, if it was one, is over
  auto now = self->clock().now();
  const auto& pol = st.policy();
  const auto& src = st.route().sources[cur.source];
  // An attempt that does not spend the retry budget (a 429 of a kind whose
  // 429s are load) goes back to the stall account.
  bool spends = policy::spends_retry(pol, reply.kind);
  st.clock->end_attempt(now, !spends);
  auto in_flight = src.tier->load().in_use;
  release_source_permit(self, cur.source, cur.permit);
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
      {src.name, reply.kind, reply.status, now - cur.started});
  if (st.committed) {
    // Bytes went to the caller: whatever happened, this attempt is the
    // answer. A failure now cannot be retried; the caller ends its stream
    // with an error.
    if (reply.kind == outcome_kind::ok)
      note_progress(self);
    finish(self, streamed_result(src.name, std::move(reply)));
    return;
  }
  switch (reply.kind) {
  case outcome_kind::ok:
    note_progress(self);
    finish(self, answer_result(src.name, std::move(reply)));
    return;
  case outcome_kind::permanent:
    // Fail fast: the request itself is wrong; no retry, no stall check.
    finish(self, answer_result(src.name, std::move(reply)));
    return;
  case outcome_kind::rate_limited:
  case outcome_kind::transient:
  case outcome_kind::timeout:
    break;
  }
  if (spends)
    ++st.fails;
  st.last_failed = cur.source;
  auto delay = policy::backoff_delay(pol.backoff, st.fails, st.uniform(),
                                     reply.retry_after);
  if (st.fails >= pol.max_attempts) {
    exhausted(self, "retry_exhausted", delay);
    return;
  }
  // SPEC §7: an upstream hint longer than the stall budget left (or than the
  // kind's max_retry_after) is not slept out on our admission permits: the
  // call ends now and passes the hint on, so the client waits, not us.
  if (reply.retry_after &&
      policy::retry_after_too_long(pol, *reply.retry_after,
                                   st.clock->stalled(now))) {
    exhausted(self, "retry_after_too_long", *reply.retry_after);
    return;
  }
  // After a 429 backoff the stall check guards against saturation loops
  // (429 may not spend the retry budget); other failures spend it.
  enter(self, governor_phase::backing_off);
  sleep_for(self, delay,
            reply.kind == outcome_kind::rate_limited
                ? after_sleep::stall_check_then_round
                : after_sleep::next_round);
}

bool is_current(governor_state& st, uint64_t seq) {
  return st.current && st.current->seq == seq;
}

// The attempt ends without the source's answer (timed out, or its runner
// failed): stop it. A runner is killed (the source sees its requester
// terminate); a self-timed source is told to cancel.
void abandon_attempt(governor_actor* self, outcome_kind kind) {
  auto& cur = *self->state.current;
  if (cur.direct_id != 0) {
    cur.cancel_direct();
  } else if (cur.runner) {
    self->unlink_from(cur.runner);
    self->send_exit(cur.runner, caf::exit_reason::kill);
  } else {
    const auto& src = self->state.route().sources[cur.source];
    self->send(caf::actor_cast<caf::actor>(src.actor), cancel_atom_v);
  }
  source_reply r;
  r.kind = kind;
  on_outcome(self, std::move(r));
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
              if (is_timeout(err) && st.current && st.current->tag == tag &&
                  !st.committed)
                abandon_attempt(self, outcome_kind::timeout);
            });
}

// What an attempt's request resolves to: the source's answer, or a failure
// that ends the attempt without one.
template <class Request>
void await_answer(governor_actor* self, Request&& request, uint64_t seq) {
  std::forward<Request>(request).then(
      [self, seq](source_reply& reply) {
        if (is_current(self->state, seq))
          on_outcome(self, std::move(reply));
      },
      [self, seq](caf::error& err) {
        if (is_current(self->state, seq))
          abandon_attempt(self, is_timeout(err) ? outcome_kind::timeout
                                                : outcome_kind::transient);
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
        caf::anon_send(g, direct_done_atom::value, seq, std::move(r));
    });
  } catch (const std::exception& e) {
    // No memory to start it: nothing went upstream; a failed attempt.
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "governor: starting an attempt at {} failed: {}", src.name,
                e.what());
    source_reply r;
    r.kind = outcome_kind::transient;
    on_outcome(self, std::move(r));
    return true;
  }
  if (id == 0)
    return false;
  self->state.current->direct_id = id;
  self->state.current->direct = direct;
  return true;
}

void start_attempt(governor_actor* self, size_t idx, permit_id permit,
                   const breaker_verdict& verdict) {
  auto& st = self->state;
  const auto& src = st.route().sources[idx];
  auto seq = ++st.attempt_seq;
  auto request = st.cfg.request;
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
  enter(self, governor_phase::attempting);
  st.clock->begin_attempt(now);
  st.current = running_attempt{seq, idx, permit, verdict, now, {}, tag, 0, {}};
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
  st.current->runner = runner;
  await_answer(self, self->request(runner, limit, run_atom_v), seq);
}

// -- selection ----------------------------------------------------------------

void try_candidate(governor_actor* self,
                   std::shared_ptr<const std::vector<size_t>> order, size_t i) {
  auto& st = self->state;
  // A source skipped at once (breaker open, tier full, no quota token) is
  // the loop's next turn, not a call: a 1,000-source route was 1,000 stack
  // frames deep. Only the breaker's answer comes back in a new turn.
  for (; i < order->size(); ++i) {
    auto idx = (*order)[i];
    const auto& src = st.route().sources[idx];
    // The mirror skips an open breaker without a message.
    if (src.breaker.is_open() || !src.tier->try_acquire())
      continue;
    auto permit = src.tier->next_permit_id();
    attach_permit(self, src.tier, src.gate, permit);
    auto seen = src.breaker.mirror->load();
    // Rate quota: a token per attempt. Taken before the breaker's answer,
    // so a rejected attempt spends a token (conservative: never over the
    // rate).
    if (src.quota) {
      auto now = self->clock().now();
      if (!src.quota->try_take(now)) {
        auto next = src.quota->next_token(now);
        if (!st.next_token || next < *st.next_token)
          st.next_token = next;
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
      start_attempt(self, idx, permit, go);
      return;
    }
    self->request(src.breaker.actor, caf::infinite, allow_atom_v)
        .then(
            [self, order, i, idx, permit](const breaker_verdict& v) {
              if (v.may_go()) {
                start_attempt(self, idx, permit, v);
                return;
              }
              auto& st = self->state;
              if (!st.soonest_retry || v.retry_at < *st.soonest_retry)
                st.soonest_retry = v.retry_at;
              release_source_permit(self, idx, permit);
              try_candidate(self, order, i + 1);
            },
            [self, order, i, idx, permit](caf::error&) {
              release_source_permit(self, idx, permit);
              try_candidate(self, order, i + 1);
            });
    return;
  }
  // No attempt this round: a retry slot is not held while waiting.
  st.retry_slot.reset();
  check_stall(self, [self] { wait_for_source(self); });
}

// The route's retry budget has no retry for this call now (SPEC §3 with
// issue 17): end it, or wait a poll interval -- unproductive time, judged
// by the stall check like any wait -- and ask again.
void retry_budget_spent(governor_actor* self) {
  auto& st = self->state;
  if (st.route().retry_budget->config().when_spent ==
      policy::when_budget_spent::fail) {
    exhausted(self, "retry_budget");
    return;
  }
  check_stall(self, [self] {
    auto& st = self->state;
    enter(self, governor_phase::waiting);
    sleep_for(self, policy::poll_delay(st.policy().poll_interval, st.uniform()),
              after_sleep::next_round);
  });
}

void next_round(governor_actor* self) {
  auto& st = self->state;
  enter(self, governor_phase::choosing);
  st.soonest_retry.reset();
  st.next_token.reset();
  const auto& route = st.route();
  // A round after a failed attempt is a retry: it needs the budget's slot.
  if (route.retry_budget && !st.attempts.empty() && !st.retry_slot) {
    st.retry_slot = route.retry_budget->try_retry();
    if (!st.retry_slot) {
      retry_budget_spent(self);
      return;
    }
  }
  auto order = policy::source_order(route.sources.size(), route.weights,
                                    st.last_failed, st.rng);
  try_candidate(
      self, std::make_shared<const std::vector<size_t>>(std::move(order)), 0);
}

// Admitted: the call counts as active on its route's retry budget until it
// finishes, then its first round.
void begin_rounds(governor_actor* self) {
  auto& st = self->state;
  if (st.route().retry_budget)
    st.active_call = st.route().retry_budget->call_started();
  next_round(self);
}

// The global tier across nodes, after the local tiers and under the same
// deadline: the one `admit` computed, handed on by the ticket. Redis
// failing, or the cluster tier not answering within the deadline plus the
// backend timeout, fails the call closed.
void admit_cluster(governor_actor* self) {
  auto& st = self->state;
  auto deadline = st.ticket.deadline();
  auto limit = deadline - self->clock().now() + st.route().backend_timeout;
  self->request(st.cfg.cluster, limit, acquire_atom_v, deadline)
      .then(
          [self](std::string& lease) {
            self->state.lease = std::move(lease);
            begin_rounds(self);
          },
          [self](caf::error& err) {
            auto& st = self->state;
            if (auto tier = busy_tier(err))
              finish(self, busy_result(tier, st.cfg.wait_timeout));
            else
              finish(self, backend_error_result(st.policy().poll_interval));
          });
}

// -- the behavior -------------------------------------------------------------

caf::behavior governor(governor_actor* self, governor_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.rng.seed(st.cfg.seed);
  st.delivery = make_call_delivery(self, std::move(st.cfg.on_done),
                                   std::move(st.cfg.on_chunk));
  // Attempt runners are linked to us; their exits (normal, or the kill we
  // send on a timeout) must not take us down.
  self->set_exit_handler([](caf::exit_msg&) {});
  return {
      [self](call_atom) -> caf::result<call_result> {
        auto& st = self->state;
        if (st.phase != governor_phase::idle)
          return caf::sec::invalid_argument; // one call per governor
        enter(self, governor_phase::admitting);
        auto reply = st.delivery->open(self);
        st.clock.emplace(self->clock().now());
        admit(self, st.cfg.admission, st.cfg.wait_timeout,
              [self](caf::expected<admission_ticket> t) {
                auto& st = self->state;
                if (!t) {
                  finish(self, busy_result(busy_tier(t.error()),
                                           st.cfg.wait_timeout));
                  return;
                }
                st.ticket = std::move(*t);
                if (st.cfg.cluster)
                  admit_cluster(self);
                else
                  begin_rounds(self);
              });
        return reply;
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
        auto& st = self->state;
        if (!is_current(st, seq))
          return; // abandoned meanwhile
        st.current->direct_id = 0;
        on_outcome(self, std::move(reply));
      },
      [self](stream_chunk_atom, uint64_t tag, std::string& bytes) {
        auto& st = self->state;
        if (!st.current || st.current->tag != tag || bytes.empty())
          return; // from an attempt that is over
        st.committed = true;
        st.delivery->chunk(self, std::move(bytes));
      },
      // Our own TTFT timer (see arm_first_byte_timer): never answered.
      [](first_byte_atom, uint64_t) { return caf::delegated<void>{}; },
      [self](status_atom) {
        auto& st = self->state;
        auto now = self->clock().now();
        return governor_status{
            st.clock ? st.clock->stalled(now) : duration{},
            st.clock ? st.clock->productive() : duration{}, st.fails,
            static_cast<uint32_t>(st.attempts.size()), st.phase};
      },
  };
}

} // namespace

duration progress_interval(const policy::call_policy& policy) {
  return std::min<duration>(policy.stall_window / 100,
                            std::chrono::milliseconds{100});
}

caf::actor spawn_governor(caf::actor_system& sys, governor_config cfg) {
  return sys.spawn(governor, std::move(cfg));
}

} // namespace sluice
