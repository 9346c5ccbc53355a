#pragma once

// The governor's insides, shared by its three files: governor.cpp (the
// behavior, the outcome step, admission, the end of the call),
// governor/attempts.cpp (starting, timing and stopping attempts) and
// governor/rounds.cpp (choosing a source, hedging, waiting). Not for use
// outside them.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/call_delivery.hpp"
#include "sluice/actors/direct_attempts.hpp"
#include "sluice/actors/governor.hpp"
#include "sluice/actors/permit.hpp"
#include "sluice/runtime/policy/call/governor_phase.hpp"
#include "sluice/runtime/policy/call/retry_budget.hpp"
#include "sluice/runtime/policy/call/retry_state.hpp"
#include "sluice/runtime/policy/call/stall_clock.hpp"
#include "sluice/runtime/policy/rng.hpp"

namespace sluice::governing {

using policy::governor_phase;
using policy::outcome_kind;

// -- the governor's state -----------------------------------------------------

/// An attempt's part in its source's headroom (the upstream's own rate
/// limits): counted sent when the attempt started, and given back -- with
/// the answer's headers, or without an answer when dropped.
struct headroom_hold {
  std::shared_ptr<source_headroom> room;
  uint64_t tokens = 0;

  headroom_hold() = default;
  headroom_hold(std::shared_ptr<source_headroom> r, uint64_t t) noexcept
      : room(std::move(r))
      , tokens(t) {}
  headroom_hold(headroom_hold&&) noexcept = default;
  headroom_hold& operator=(headroom_hold&& other) noexcept {
    if (this != &other) {
      release();
      room = std::move(other.room);
      tokens = other.tokens;
    }
    return *this;
  }
  ~headroom_hold() { release(); }

  void answered(const policy::provider_limits& limits, time_point now) {
    if (room)
      room->answered(tokens, limits, now);
    room.reset();
  }

  void release() noexcept {
    if (room)
      room->abandoned(tokens);
    room.reset();
  }
};

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
  /// Its source's headroom, while it runs.
  headroom_hold room;

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

// What a backoff or poll timer does when it fires.
enum class after_sleep { next_round, stall_check_then_round };

/// The parts of a call's state most calls never touch -- hedging, a breaker
/// that rejects, a source out of quota, a route's retry budget, the cluster
/// tier: made on first use (`governor_state::more`), so that a call that
/// needs none of it (a parked call above all) does not carry it.
struct uncommon_state {
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
  /// Failures, the last failed source (tried last next round), the hedge
  /// group, hedges started, the stream's commitment: what decides the next
  /// step after each outcome.
  policy::retry_state retry;
  policy::small_rng rng;
  /// Only the latest timer counts; earlier ones are stale.
  uint64_t timer_seq = 0;
  /// Sequence number of the latest attempt; answers and chunks of earlier
  /// attempts are dropped.
  uint64_t attempt_seq = 0;
  /// Changed only by `enter`.
  governor_phase phase = governor_phase::idle;
  after_sleep on_wake = after_sleep::next_round;
  bool watching = false;

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

// -- governor.cpp -------------------------------------------------------------

/// The one place the phase changes.
void enter(governor_actor* self, governor_phase to);

/// Ends the call with `result` and quits: attempts still out lost, every
/// permit and lease back.
void finish(governor_actor* self, call_result result);

/// Ends the call as `all_sources_exhausted` with `reason`.
void exhausted(governor_actor* self, const char* reason,
               std::optional<duration> retry_in = std::nullopt);

void sleep_for(governor_actor* self, duration d, after_sleep then);

/// Runs `then` unless the call has stalled.
void check_stall(governor_actor* self, std::function<void()> then);

/// Attempt `seq` ended with `reply`: the retry state's next step.
void on_outcome(governor_actor* self, uint64_t seq, source_reply reply);

// -- governor/attempts.cpp ----------------------------------------------------

running_attempt* find_running(governor_state& st, uint64_t seq);

/// Whether attempt `seq` is still out.
bool is_current(const governor_state& st, uint64_t seq);

bool is_timeout(const caf::error& err);

/// Returns a source permit without waking anyone.
void release_source_permit(governor_actor* self, size_t idx, permit_id id);

/// The attempts still out other than `keep` (0: all) lost.
void cancel_others(governor_actor* self, uint64_t keep);

/// `tokens`: what the call counts against the source's headroom (if it
/// keeps one) as it is sent.
void start_attempt(governor_actor* self, size_t idx, permit_id permit,
                   const breaker_verdict& verdict, bool hedge = false,
                   uint64_t tokens = 0);

/// What the call reserves in tokens at a source whose upstream says what
/// it has left: the caller's figure, else the payload's estimate, made
/// once (0 while no answer of the source has said anything).
uint64_t call_tokens(governor_state& st, const source_headroom& room);

// -- governor/rounds.cpp ------------------------------------------------------

/// A round: the sources in the route's order, the last failed one last.
void next_round(governor_actor* self);

/// Waiting, a breaker or a permit freed: a round now.
void wake_early(governor_actor* self);

/// Arms attempt `seq`'s hedge timer, if the call may hedge it.
void arm_hedge_timer(governor_actor* self, uint64_t seq);

} // namespace sluice::governing
