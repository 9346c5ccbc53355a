#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <variant>

#include "sluice/runtime/policy/call/backoff.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/breaker/outcome_window.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// Largest window size, bucket count, `min_samples` and probe count: the
/// windows are allocated up front (a count window holds one sample per
/// slot, a time window one bucket per slot), and 2e9 buckets died of
/// bad_alloc inside the breaker actor.
constexpr uint32_t window_limit = 10000;

/// Largest `open_duration_growth` factor (it is capped by
/// `open_duration_max` anyway; larger is a typo).
constexpr double open_duration_growth_limit = 100.0;

/// The three states of a circuit breaker (SPEC §2).
enum class breaker_state : uint8_t {
  closed,
  open,
  half_open,
};

/// The state's name: "closed", "open" or "half_open" (/status, /events,
/// metrics help, the breaker relay's messages between nodes).
std::string_view to_string(breaker_state x) noexcept;

/// Parses a state name as printed by `to_string`; nullopt for any other.
std::optional<breaker_state>
parse_breaker_state(std::string_view name) noexcept;

/// Settings of one breaker. Defaults follow resilience4j where it is sane and
/// are smaller where its defaults are known to hurt (a 60 s wait, 100 calls
/// before any verdict).
struct breaker_config {
  enum class window_kind : uint8_t { count, time };

  window_kind window = window_kind::count;
  /// Count window: the last `window_size` outcomes.
  uint32_t window_size = 50;
  /// Time window: the last `window_span`, in `window_buckets` buckets.
  duration window_span = std::chrono::seconds{30};
  uint32_t window_buckets = 10;
  /// No verdict before the window holds this many outcomes.
  uint32_t min_samples = 10;
  /// Opens when the failure rate in the window reaches this, in (0, 1].
  double failure_rate_threshold = 0.5;
  /// Successes slower than this count as slow calls (off when empty).
  std::optional<duration> slow_call;
  /// Opens when the slow-call rate reaches this, in (0, 1].
  double slow_call_rate_threshold = 1.0;
  /// How long the breaker stays open before it lets a probe through.
  duration open_duration = std::chrono::seconds{30};
  /// Each consecutive re-opening multiplies the open duration by this (>= 1),
  /// up to `open_duration_max`.
  double open_duration_growth = 1.0;
  duration open_duration_max = std::chrono::minutes{5};
  /// Probes allowed at once in half-open.
  uint32_t half_open_probes = 1;
  /// Which outcomes count as failures, successes or not at all.
  outcome_classes classes;
  /// Whether a failure carrying Retry-After (a 503 saying "not before")
  /// opens the breaker until that instant.
  bool open_on_retry_after = true;
};

/// Throws `std::invalid_argument` naming the field (e.g.
/// `failure_rate_threshold`) of the first nonsense setting.
void validate(const breaker_config& cfg);

/// A state change, as the breaker announces it.
struct breaker_transition {
  breaker_state from;
  breaker_state to;
  /// The generation entered by this transition.
  uint64_t generation;
  time_point at;
};

/// What the routes' ejection limits (`policy::ejection_ledger`) are to be
/// told after a step of the breaker: nothing, the source is out of service
/// (`ejected`), or back in it (`restored`, also what clears a held mark).
enum class ejection_action : uint8_t { none, eject, restore };

/// The ledger's action for a transition: entering closed restores, entering
/// any other state ejects; no transition, nothing.
ejection_action
ejection_for(const std::optional<breaker_transition>& t) noexcept;

/// One step of the breaker: the transition it made (to announce) and what
/// the ejection ledger is to be told. The breaker actor applies both in one
/// place.
struct breaker_step {
  std::optional<breaker_transition> transition;
  ejection_action ejection = ejection_action::none;

  /// A transition's step, with the ledger's action it implies.
  static breaker_step of(std::optional<breaker_transition> t) noexcept {
    return {t, ejection_for(t)};
  }
};

/// The breaker's state machine, without actors, clocks or I/O: every method
/// takes the current time. Every transition starts a new *generation*;
/// outcomes carry the generation they were admitted under, and outcomes from
/// another generation never move the state (a call started while closed that
/// finishes during half-open is not a probe).
class breaker_policy {
public:
  /// `cfg` must pass `validate`.
  explicit breaker_policy(const breaker_config& cfg);

  breaker_state state() const noexcept { return state_; }

  uint64_t generation() const noexcept { return generation_; }

  /// When an open breaker will let a probe through.
  time_point open_until() const noexcept { return open_until_; }

  const breaker_config& config() const noexcept { return cfg_; }

  /// How outcome `k` counts for this breaker.
  outcome_class classify(outcome_kind k) const noexcept {
    return cfg_.classes.of(k);
  }

  /// Current window counts (closed state).
  window_totals window(time_point now) const noexcept;

  /// Records the outcome of a call admitted under `generation`. `failed` is
  /// the outcome class (the source's classification decides what fails);
  /// `elapsed` is the call's duration, for the slow-call rule.
  /// In half-open the outcome is the probe's verdict.
  ///
  /// `may_open`, if set, is asked before the window opens a closed breaker
  /// (a route's ejection limit, `policy::ejection_ledger`): false keeps it
  /// closed and `held()` until an outcome that does not call for opening,
  /// or one that may open it.
  std::optional<breaker_transition>
  record(uint64_t generation, bool failed, duration elapsed, time_point now,
         const std::function<bool()>& may_open = {});

  /// The outcome of a call admitted under `generation`, classified `cls`
  /// by the source's classes (`classify`), with the upstream's "not
  /// before" (`retry_after`, Retry-After on a 503) if it gave one. The
  /// window records it (`record`), a held breaker whose failures stopped is
  /// restored, and a failure's Retry-After opens the breaker until then
  /// (if the outcome is current) or extends an open period (whatever its
  /// generation: extending moves no state, and a later instant must win).
  /// `may_eject`, if set, is the routes' ejection limit: asked before any
  /// opening of a closed breaker by this outcome; refused, a window keeps
  /// it closed and held, and a Retry-After leaves no mark (the call's own
  /// backoff still honours the hint).
  breaker_step on_outcome(uint64_t generation, outcome_class cls,
                          duration elapsed,
                          std::optional<time_point> retry_after,
                          time_point now,
                          const std::function<bool()>& may_eject = {});

  /// Operator reset (`reset`): always restores the source in the ledger,
  /// since a closed breaker held past an ejection limit is reset too.
  breaker_step reset_step(time_point now);

  /// New settings in place (a config reload that changed only them): the
  /// state, generation, open period, isolation and opening count stay; the
  /// window starts empty in its new shape (samples taken under other
  /// thresholds are not read again), so a held breaker is no longer held:
  /// returns `restore` for one that was. `cfg` must pass `validate`.
  ejection_action reconfigure(const breaker_config& cfg);

  /// Whether the window calls for opening and an ejection limit refused.
  bool held() const noexcept { return held_; }

  /// Whether an operator isolated the breaker (open until `reset`).
  bool isolated() const noexcept { return isolated_; }

  /// Operator action: open now and stay open, letting no probe through,
  /// until `reset`. Returns the transition if the state changed.
  std::optional<breaker_transition> isolate(time_point now);

  /// Operator action: close now with a cleared window and the open-duration
  /// growth reset, whatever the state (also ends an isolation).
  std::optional<breaker_transition> reset(time_point now);

  /// Another node closed its breaker for the same source (its probe
  /// succeeded): close too, with a cleared window, unless isolated here or
  /// already closed.
  std::optional<breaker_transition> close_from_peer(time_point now);

  /// Open -> half-open once `open_until()` has passed; nothing otherwise.
  std::optional<breaker_transition> on_open_elapsed(time_point now);

  /// The upstream said "not before `until`" (Retry-After on a 503): open now
  /// (if not open) until `until`, or extend an open period to it. A later
  /// instant always wins over an earlier one. The server's instant is
  /// capped at `now + open_duration_max` (SPEC §7): an upstream cannot
  /// take the route down for longer than our own longest opening.
  std::optional<breaker_transition> hold_open_until(time_point until,
                                               time_point now);

private:
  breaker_transition move_to(breaker_state to, time_point now);
  void open(time_point now, time_point at_least);
  duration next_open_duration() const noexcept;

  breaker_config cfg_;
  breaker_state state_ = breaker_state::closed;
  uint64_t generation_ = 1;
  time_point open_until_{};
  bool isolated_ = false;
  bool held_ = false;
  uint32_t consecutive_opens_ = 0;
  std::variant<count_window, time_window> window_;
};

} // namespace sluice::policy
