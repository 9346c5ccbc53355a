#include "sluice/runtime/policy/breaker/breaker_policy.hpp"
#include "sluice/runtime/policy/field_error.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace sluice::policy {

std::string_view to_string(breaker_state x) noexcept {
  switch (x) {
  case breaker_state::closed:
    return "closed";
  case breaker_state::open:
    return "open";
  case breaker_state::half_open:
    return "half_open";
  }
  return "unknown";
}

std::optional<breaker_state>
parse_breaker_state(std::string_view name) noexcept {
  for (auto x :
       {breaker_state::closed, breaker_state::open, breaker_state::half_open})
    if (to_string(x) == name)
      return x;
  return std::nullopt;
}

namespace {

[[noreturn]] void refuse(const char* field, const std::string& problem) {
  throw field_error(field, problem);
}

void check_rate(const char* field, double x) {
  if (!(x > 0.0 && x <= 1.0))
    refuse(field, "must be a rate in (0, 1], got " + std::to_string(x));
}

void check_positive(const char* field, duration d) {
  if (d <= duration::zero())
    refuse(field, "must be positive");
  if (d > duration_limit)
    refuse(field, "must be at most a week (604800 s)");
}

void check_count(const char* field, uint32_t n) {
  if (n == 0 || n > window_limit)
    refuse(field, "must be in [1, " + std::to_string(window_limit) + "]");
}

} // namespace

void validate(const breaker_config& cfg) {
  if (cfg.window == breaker_config::window_kind::count)
    check_count("window_size", cfg.window_size);
  if (cfg.window == breaker_config::window_kind::time) {
    check_positive("window_span", cfg.window_span);
    check_count("window_buckets", cfg.window_buckets);
  }
  check_count("min_samples", cfg.min_samples);
  check_rate("failure_rate_threshold", cfg.failure_rate_threshold);
  if (cfg.slow_call)
    check_positive("slow_call", *cfg.slow_call);
  check_rate("slow_call_rate_threshold", cfg.slow_call_rate_threshold);
  check_positive("open_duration", cfg.open_duration);
  if (!(cfg.open_duration_growth >= 1.0 &&
        cfg.open_duration_growth <= open_duration_growth_limit))
    refuse("open_duration_growth", "must be a factor in [1, 100]");
  if (cfg.open_duration_max < cfg.open_duration)
    refuse("open_duration_max", "must be at least open_duration");
  check_positive("open_duration_max", cfg.open_duration_max);
  check_count("half_open_probes", cfg.half_open_probes);
}

namespace {

std::variant<count_window, time_window> make_window(const breaker_config& c) {
  if (c.window == breaker_config::window_kind::count)
    return count_window{c.window_size};
  return time_window{c.window_span, c.window_buckets};
}

} // namespace

breaker_policy::breaker_policy(const breaker_config& cfg)
    : cfg_((validate(cfg), cfg))
    , window_(make_window(cfg)) {
  // nop
}

ejection_action
ejection_for(const std::optional<breaker_transition>& t) noexcept {
  if (!t)
    return ejection_action::none;
  return t->to == breaker_state::closed ? ejection_action::restore
                                        : ejection_action::eject;
}

ejection_action breaker_policy::reconfigure(const breaker_config& cfg) {
  validate(cfg);
  window_ = make_window(cfg);
  cfg_ = cfg;
  bool was_held = std::exchange(held_, false);
  return was_held ? ejection_action::restore : ejection_action::none;
}

breaker_step breaker_policy::on_outcome(uint64_t generation, outcome_class cls,
                                        duration elapsed,
                                        std::optional<time_point> retry_after,
                                        time_point now,
                                        const std::function<bool()>& may_eject) {
  if (cls == outcome_class::ignored)
    return {};
  bool current = generation == generation_;
  bool was_held = held_;
  bool failed = cls == outcome_class::failure;
  auto step = breaker_step::of(record(generation, failed, elapsed, now,
                                      may_eject));
  // Held past an ejection limit, and the failures stopped: in service for
  // good again.
  if (!step.transition && was_held && !held_ &&
      state_ == breaker_state::closed)
    step.ejection = ejection_action::restore;
  if (!cfg_.open_on_retry_after || !failed || !retry_after ||
      !(current || state_ == breaker_state::open))
    return step;
  // Opening a closed breaker so is an ejection like any: past a route's
  // limit it stays closed. Refused, it is held only while the window itself
  // calls for opening (a single hinted failure leaves no mark nothing would
  // clear).
  if (state_ == breaker_state::closed && may_eject && !may_eject()) {
    if (!held_)
      step.ejection = ejection_action::restore;
    return step;
  }
  if (auto t = hold_open_until(*retry_after, now))
    step = breaker_step::of(t);
  return step;
}

breaker_step breaker_policy::reset_step(time_point now) {
  return {reset(now), ejection_action::restore};
}

window_totals breaker_policy::window(time_point now) const noexcept {
  if (auto w = std::get_if<count_window>(&window_))
    return w->totals();
  return std::get<time_window>(window_).totals(now);
}

std::optional<breaker_transition>
breaker_policy::record(uint64_t generation, bool failed, duration elapsed,
                       time_point now, const std::function<bool()>& may_open) {
  if (generation != generation_ || state_ == breaker_state::open)
    return std::nullopt;
  if (state_ == breaker_state::half_open) {
    if (failed) {
      open(now, now);
      return breaker_transition{breaker_state::half_open, breaker_state::open,
                                generation_, now};
    }
    consecutive_opens_ = 0;
    std::visit([](auto& w) { w.clear(); }, window_);
    return move_to(breaker_state::closed, now);
  }
  window_sample s{failed,
                  !failed && cfg_.slow_call && elapsed > *cfg_.slow_call};
  if (auto w = std::get_if<count_window>(&window_))
    w->record(s);
  else
    std::get<time_window>(window_).record(now, s);
  auto t = window(now);
  bool too_many_failures = t.failure_rate() >= cfg_.failure_rate_threshold;
  bool too_slow =
      cfg_.slow_call && t.slow_rate() >= cfg_.slow_call_rate_threshold;
  if (t.calls < cfg_.min_samples || (!too_many_failures && !too_slow)) {
    held_ = false;
    return std::nullopt;
  }
  if (may_open) {
    // Held: only a failed or slow outcome asks again -- a success must
    // never be what takes a recovering source out.
    if (held_ && !s.failed && !s.slow)
      return std::nullopt;
    if (!may_open()) {
      held_ = true;
      return std::nullopt;
    }
  }
  held_ = false;
  open(now, now);
  return breaker_transition{breaker_state::closed, breaker_state::open,
                            generation_, now};
}

std::optional<breaker_transition> breaker_policy::isolate(time_point now) {
  isolated_ = true;
  if (state_ == breaker_state::open)
    return std::nullopt;
  auto from = state_;
  open(now, now);
  return breaker_transition{from, breaker_state::open, generation_, now};
}

std::optional<breaker_transition> breaker_policy::reset(time_point now) {
  isolated_ = false;
  held_ = false;
  consecutive_opens_ = 0;
  std::visit([](auto& w) { w.clear(); }, window_);
  if (state_ == breaker_state::closed)
    return std::nullopt;
  return move_to(breaker_state::closed, now);
}

std::optional<breaker_transition>
breaker_policy::close_from_peer(time_point now) {
  if (isolated_ || state_ == breaker_state::closed)
    return std::nullopt;
  consecutive_opens_ = 0;
  std::visit([](auto& w) { w.clear(); }, window_);
  return move_to(breaker_state::closed, now);
}

std::optional<breaker_transition>
breaker_policy::on_open_elapsed(time_point now) {
  if (state_ != breaker_state::open || isolated_ ||
      !deadline_passed(open_until_, now))
    return std::nullopt;
  return move_to(breaker_state::half_open, now);
}

std::optional<breaker_transition>
breaker_policy::hold_open_until(time_point until, time_point now) {
  until = std::min(until, now + cfg_.open_duration_max);
  if (state_ == breaker_state::open) {
    open_until_ = std::max(open_until_, until);
    return std::nullopt;
  }
  // The server names the instant (capped above): open until then. This is
  // not one of our own openings, so it neither grows nor resets the open
  // duration.
  auto from = state_;
  state_ = breaker_state::open;
  ++generation_;
  open_until_ = std::max(until, now);
  std::visit([](auto& w) { w.clear(); }, window_);
  return breaker_transition{from, breaker_state::open, generation_, now};
}

breaker_transition breaker_policy::move_to(breaker_state to, time_point now) {
  breaker_transition t{state_, to, ++generation_, now};
  state_ = to;
  held_ = false;
  return t;
}

void breaker_policy::open(time_point now, time_point at_least) {
  ++consecutive_opens_;
  state_ = breaker_state::open;
  held_ = false;
  ++generation_;
  open_until_ = std::max(now + next_open_duration(), at_least);
  std::visit([](auto& w) { w.clear(); }, window_);
}

duration breaker_policy::next_open_duration() const noexcept {
  // open_duration * growth^(consecutive_opens - 1), capped.
  double factor = std::pow(cfg_.open_duration_growth,
                           static_cast<double>(consecutive_opens_ - 1));
  auto max = std::chrono::duration<double>(cfg_.open_duration_max);
  auto grown = std::chrono::duration<double>(cfg_.open_duration) * factor;
  if (!(grown < max))
    return cfg_.open_duration_max;
  return std::chrono::duration_cast<duration>(grown);
}

} // namespace sluice::policy
