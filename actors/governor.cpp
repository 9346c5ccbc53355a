#include "sluice/actors/governor.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include <boost/container/small_vector.hpp>
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
#include "sluice/runtime/policy/call/governor_phase.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"
#include "sluice/runtime/policy/rng.hpp"
#include "sluice/runtime/policy/call/source_order.hpp"
#include "sluice/runtime/policy/call/stall_clock.hpp"

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
  /// Its interval in the call's stall clock.
  policy::stall_clock::attempt_id clock_id = 0;
  /// Started beside a slow attempt (hedging), not after a failed one.
  bool hedge = false;

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

using running_list = boost::container::small_vector<running_attempt, 1>;

/// The answer to an attempt started directly, sent by the source's client
/// to the governor: (direct_done, attempt seq, source_reply).
using direct_done_atom = caf::atom_constant<caf::atom("dirdone")>;

/// The hedge timer of an attempt: a request to itself, never answered,
/// whose timeout is the hedge delay (see arm_first_byte_timer).
using hedge_timer_atom = caf::atom_constant<caf::atom("hedgetmr")>;

// What a backoff or poll timer does when it fires.
enum class after_sleep { next_round, stall_check_then_round };

/// The parts of a call's state most calls never touch -- hedging, a breaker
/// that rejects, a source out of quota, a route's retry budget, the cluster
/// tier: made on first use (`governor_state::more`), so that a call that
/// needs none of it (a parked call above all) does not carry it.
struct uncommon_state {
  /// Failures while another attempt was still out (hedging): the longest
  /// upstream hint among them, and whether one was a 429 -- kept for the
  /// backoff once the last attempt of the group has failed too.
  std::optional<duration> group_hint;
  bool group_rate_limited = false;
  /// Earliest instant a rejecting breaker named in the last round.
  std::optional<time_point> soonest_retry;
  /// Earliest instant a source out of quota has a token again (last round).
  std::optional<time_point> next_token;
  /// The cluster lease this call holds, if any.
  std::string lease;
  /// With the route's retry budget: this call counted active (from
  /// admission), and the retry slot of the round or attempt under way.
  policy::retry_budget::hold active_call;
  policy::retry_budget::hold retry_slot;
};

/// One governor's state. What every call has is kept small (see
/// `uncommon_state`); the config it was spawned with is not kept whole:
/// its callbacks move into `delivery`, its admission path gives way to the
/// ticket once the call is admitted.
struct governor_state {
  /// The call as made; each attempt starts from a copy.
  call_request request;
  /// Shared by every call of the route (immutable).
  std::shared_ptr<const route_plan> plan;
  /// The global tier across nodes (null: none).
  caf::actor cluster;
  duration wait_timeout{};
  /// The tiers to admit the call through until it is admitted, then the
  /// permits it holds (one never needs both).
  std::variant<admission_path, admission_ticket> admission;
  /// The promise form or the callback form (`governor_config::on_done`).
  call_delivery delivery;
  std::optional<policy::stall_clock> clock;
  std::vector<attempt_record> attempts;
  /// Attempts in flight: one, or more while hedging (in start order). The
  /// first in place: no allocation per attempt.
  running_list running;
  /// See `uncommon_state` (null until first needed).
  std::unique_ptr<uncommon_state> extra;
  /// The source of the last failed attempt: tried last next round.
  std::optional<size_t> last_failed;
  policy::small_rng rng;
  /// Only the latest timer counts; earlier ones are stale.
  uint64_t timer_seq = 0;
  /// Sequence number of the latest attempt; answers and chunks of earlier
  /// attempts are dropped.
  uint64_t attempt_seq = 0;
  uint32_t fails = 0;
  /// Hedged attempts started so far (at most the policy's `max_hedged`).
  uint32_t hedges = 0;
  /// Changed only by `enter`.
  governor_phase phase = governor_phase::idle;
  after_sleep on_wake = after_sleep::next_round;
  bool watching = false;
  /// A chunk went to the caller: no retry or failover from here on.
  bool committed = false;

  static inline const char* name = "sluice.governor";

  /// Runs when the governor terminates, killed or not (CAF destroys the
  /// state as it finalizes the actor, before its cleanup): an attempt
  /// still in flight that the governor started itself has no actor
  /// watching it -- cancellation is this. (An actor the scheduler releases
  /// at its stop is not finalized; its attempt then ends with the loops.)
  ~governor_state() {
    for (auto& a : running)
      a.cancel_direct();
  }

  const route_plan& route() const { return *plan; }

  const policy::call_policy& policy() const { return plan->policy; }

  double uniform() { return rng.uniform(); }

  /// The uncommon parts, made on first use.
  uncommon_state& more() {
    if (!extra)
      extra = std::make_unique<uncommon_state>();
    return *extra;
  }

  /// The retry slot of the round or attempt under way, if one is held.
  bool holds_retry_slot() const { return extra && extra->retry_slot; }

  void drop_retry_slot() {
    if (extra)
      extra->retry_slot.reset();
  }
};

/// The governor: a stateful actor built from its config directly (no
/// spawn-time copy of the config in an init function).
class governor_actor : public caf::stateful_actor<governor_state> {
public:
  governor_actor(caf::actor_config& actor_cfg, governor_config cfg);

  caf::behavior make_behavior() override;

private:
  /// See `governor_config::start_at_once`.
  bool start_at_once_ = false;
};



void next_round(governor_actor* self);
void retry_budget_spent(governor_actor* self);
void cancel_others(governor_actor* self, uint64_t keep);

running_attempt* find_running(governor_state& st, uint64_t seq) {
  for (auto& a : st.running)
    if (a.seq == seq)
      return &a;
  return nullptr;
}

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
               std::optional<duration> retry_in = std::nullopt) {
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

void on_outcome(governor_actor* self, uint64_t seq, source_reply reply) {
  auto& st = self->state;
  auto it = std::find_if(st.running.begin(), st.running.end(),
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
  st.attempts.back().reason =
      reply.reason.substr(0, max_attempt_reason_bytes);
  if (st.committed) {
    // Bytes went to the caller: whatever happened, this attempt is the
    // answer. A failure now cannot be retried; the caller ends its stream
    // with an error.
    if (reply.kind == outcome_kind::ok)
      note_progress(self);
    st.attempts.back().won = true;
    finish(self, streamed_result(src.name, std::move(reply)));
    return;
  }
  switch (reply.kind) {
  case outcome_kind::ok:
    // The first complete answer wins; hedged attempts still out are
    // cancelled (finish) and their upstream requests closed.
    note_progress(self);
    st.attempts.back().won = true;
    finish(self, answer_result(src.name, std::move(reply)));
    return;
  case outcome_kind::permanent:
    // Fail fast: the request itself is wrong; no retry, no stall check.
    st.attempts.back().won = true;
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
  // Hedging: another attempt is still out; its answer decides what next.
  // This failure's hint is kept for the backoff after the last one.
  if (!st.running.empty()) {
    auto& x = st.more();
    if (reply.retry_after &&
        (!x.group_hint || *reply.retry_after > *x.group_hint))
      x.group_hint = reply.retry_after;
    x.group_rate_limited =
        x.group_rate_limited || reply.kind == outcome_kind::rate_limited;
    return;
  }
  bool rate_limited = reply.kind == outcome_kind::rate_limited;
  if (auto& x = st.extra) {
    if (x->group_hint &&
        (!reply.retry_after || *x->group_hint > *reply.retry_after))
      reply.retry_after = x->group_hint;
    rate_limited = rate_limited || x->group_rate_limited;
    x->group_hint.reset();
    x->group_rate_limited = false;
  }
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
            rate_limited ? after_sleep::stall_check_then_round
                         : after_sleep::next_round);
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
    attempt_record r{st.route().sources[a.source].name,
                     outcome_kind::transient, 0, now - a.started, a.hedge};
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
              if (is_timeout(err) && is_current(st, tag) && !st.committed)
                abandon_attempt(self, tag, outcome_kind::timeout,
                                "timeout: first byte (ttft_timeout_s)");
            });
}

// What an attempt's request resolves to: the source's answer, or a failure
// that ends the attempt without one.
template <class Request>
void await_answer(governor_actor* self, Request&& request, uint64_t seq) {
  std::forward<Request>(request).then(
      [self, seq](source_reply& reply) { on_outcome(self, seq, std::move(reply)); },
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

void arm_hedge_timer(governor_actor* self, uint64_t seq);

void start_attempt(governor_actor* self, size_t idx, permit_id permit,
                   const breaker_verdict& verdict, bool hedge = false) {
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
  if (hedge)
    ++st.hedges;
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

// -- selection ----------------------------------------------------------------

// Tries the sources of `order` from the `i`th on. A hedge (`hedge`) skips
// sources with an attempt out, and finding none just goes without: the
// attempt under way goes on, nothing waits.
// `hedge_for`: the attempt a hedge is for (0: an ordinary round).
bool running_at(const governor_state& st, size_t idx) {
  return std::any_of(st.running.begin(), st.running.end(),
                     [idx](auto& a) { return a.source == idx; });
}

// A hedge whose moment passed while its breaker answered: the attempt it
// was for is over (a later round's attempt is not it), the stream began,
// or another attempt took that source meanwhile.
bool stale_hedge(const governor_state& st, uint64_t hedge_for, size_t idx) {
  return st.phase != governor_phase::attempting || st.committed ||
         !is_current(st, hedge_for) || running_at(st, idx);
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
    if (!hedge && st.route().retry_budget && !st.attempts.empty() &&
        !st.holds_retry_slot()) {
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
      start_attempt(self, idx, permit, go, hedge);
      return;
    }
    // The round goes on with the rest of the order when the breaker
    // answers: one of the two handlers runs, once, and takes it.
    auto rest = std::make_shared<std::vector<size_t>>(std::move(order));
    self->request(src.breaker.actor, caf::infinite, allow_atom_v)
        .then(
            [self, rest, i, idx, permit, hedge_for,
             hedge](const breaker_verdict& v) {
              auto& st = self->state;
              if (hedge && stale_hedge(st, hedge_for, idx)) {
                release_source_permit(self, idx, permit);
                if (v.lease != 0) // an unused probe lease goes back
                  self->send(st.route().sources[idx].breaker.actor,
                             lease_expire_atom_v, v.lease);
                return;
              }
              if (v.may_go()) {
                start_attempt(self, idx, permit, v, hedge);
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
              if (hedge_for != 0 &&
                  stale_hedge(self->state, hedge_for, idx))
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
  if (st.route().retry_budget->config().when_spent ==
          policy::when_budget_spent::fail ||
      policy::local_stall_exceeded(st.clock->stalled(self->clock().now()),
                                   st.policy().stall_window)) {
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
  if (st.phase != governor_phase::attempting || st.committed ||
      !is_current(st, seq) || st.hedges >= st.policy().max_hedged)
    return;
  const auto& route = st.route();
  auto order = policy::source_order(route.sources.size(), route.weights,
                                    st.last_failed, st.rng);
  try_candidate(self, std::move(order), 0, seq);
}

// Arms attempt `seq`'s hedge timer, if the kind hedges and may still. A
// request to itself that times out, as the TTFT timer (no strong
// reference from the clock).
void arm_hedge_timer(governor_actor* self, uint64_t seq) {
  auto& st = self->state;
  const auto& pol = st.policy();
  if (!pol.hedge_after || st.hedges >= pol.max_hedged || st.committed)
    return;
  self->request(caf::actor_cast<caf::actor>(self), *pol.hedge_after,
                hedge_timer_atom::value, seq)
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
                                    st.last_failed, st.rng);
  try_candidate(self, std::move(order), 0);
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
  admit_call(self, path, st.wait_timeout,
             [self](caf::expected<admission_ticket> t) {
               auto& st = self->state;
               if (!t) {
                 finish(self,
                        busy_result(busy_tier(t.error()), st.wait_timeout));
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
        if (!st.committed) {
          // The first bytes commit the call to this attempt: no retry, no
          // failover, and hedged attempts still out are cancelled. A
          // retry that streams is no longer one in the budget's sense.
          st.committed = true;
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
            st.clock ? st.clock->productive() : duration{}, st.fails,
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

} // namespace

duration progress_interval(const policy::call_policy& policy) {
  return std::min<duration>(policy.stall_window / 100,
                            std::chrono::milliseconds{100});
}

caf::actor spawn_governor(caf::actor_system& sys, governor_config cfg) {
  return sys.spawn<governor_actor>(std::move(cfg));
}

} // namespace sluice
