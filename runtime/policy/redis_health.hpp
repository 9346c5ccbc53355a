#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

// -- limits -------------------------------------------------------------------

/// The least time a Redis command may be given: a socket timeout of zero
/// would mean "wait forever", and less than this cannot be met anyway.
constexpr duration min_command_time = std::chrono::milliseconds{1};

/// The least pause between two PINGs to a Redis that is down, whatever
/// `reconnect_after` says: no busy loop against a refusing port.
constexpr duration min_probe_interval = std::chrono::milliseconds{10};

// -- one command --------------------------------------------------------------

/// How long a connect or a command may wait at `now`: `limit` (the connect
/// or command timeout), or less when `deadline` is nearer. Nothing when the
/// deadline leaves less than `min_command_time`: then it is not tried at all.
inline std::optional<duration> command_time(duration limit,
                                            std::optional<time_point> deadline,
                                            time_point now) noexcept {
  if (!deadline)
    return limit;
  auto left = *deadline - now;
  if (left < min_command_time)
    return std::nullopt;
  return std::min(limit, left);
}

/// Whether a command that went unanswered within `timeout` says anything
/// about Redis: not when the caller's deadline cut the wait below half a
/// command timeout -- a healthy Redis may well take longer than that.
constexpr bool unanswered_is_fault(duration timeout,
                                   duration command_timeout) noexcept {
  return !(timeout < command_timeout / 2);
}

// -- one connection -----------------------------------------------------------

/// A client's pause after a failed connect: for `reconnect_after` its
/// commands fail at once instead of each trying to connect again, so a
/// Redis that refuses or is unreachable gets no reconnect storm and the
/// callers no connect timeout each.
class reconnect_pause {
public:
  explicit reconnect_pause(duration reconnect_after) noexcept
      : reconnect_after_(reconnect_after) {
    // nop
  }

  /// Whether a connect may be tried at `now`.
  bool may_connect(time_point now) const noexcept {
    return !failed_at_ || now - *failed_at_ >= reconnect_after_;
  }

  /// A connect tried at `now` failed (refused, timed out, AUTH refused).
  void connect_failed(time_point now) noexcept { failed_at_ = now; }

  /// A connect succeeded: the next failure starts a new pause.
  void connected() noexcept { failed_at_.reset(); }

private:
  duration reconnect_after_;
  std::optional<time_point> failed_at_;
};

// -- one worker ---------------------------------------------------------------

/// Whether a Redis worker's connection is *up* or *down*, and what follows
/// for its jobs and its probes. A fault (no answer in time, a connection
/// refused or closed) marks it down; while down, jobs are refused without
/// queueing and a PING is due every `probe_interval()`, counted from the
/// fault or from the last unanswered PING; the first answer marks it up.
///
/// Not thread-safe: its owner guards it (the worker, by its queue's mutex).
class redis_health {
public:
  redis_health(duration command_timeout, duration reconnect_after) noexcept
      : command_timeout_(command_timeout)
      , probe_interval_(std::max(reconnect_after, min_probe_interval)) {
    // nop
  }

  /// Whether jobs are refused now (until a PING is answered).
  bool down() const noexcept { return down_; }

  /// A job's command failed with a fault at `now`. Returns whether that
  /// marked Redis down (it was up): the transition is logged, once.
  bool fault(time_point now) noexcept {
    if (down_)
      return false;
    down_ = true;
    probe_due_ = now + probe_interval_;
    return true;
  }

  /// While down: when the next PING is due.
  time_point probe_due() const noexcept { return probe_due_; }

  /// Whether a PING is due at `now` (only while down).
  bool probe_due(time_point now) const noexcept {
    return down_ && now >= probe_due_;
  }

  /// The deadline of a PING sent at `now`: one command timeout.
  time_point probe_deadline(time_point now) const noexcept {
    return now + command_timeout_;
  }

  /// A PING went unanswered; `now` is when that was known. The next one is
  /// a full interval later, so a slow refusal cannot shorten the pause.
  void probe_failed(time_point now) noexcept {
    probe_due_ = now + probe_interval_;
  }

  /// A PING was answered. Returns whether that marked Redis up (it was
  /// down): the transition is logged, once.
  bool probe_answered() noexcept {
    bool was_down = down_;
    down_ = false;
    return was_down;
  }

  /// Whether a job queued with `deadline` is stale when the worker reaches
  /// it at `now`: it waited out its caller's deadline behind a slow Redis,
  /// so it is refused without being sent.
  static bool stale(time_point deadline, time_point now) noexcept {
    return deadline_passed(deadline, now);
  }

  /// The deadline a job starting at `now` runs with: its caller's, and at
  /// most one command timeout, so a frozen Redis costs a job no more.
  time_point job_deadline(time_point deadline, time_point now) const noexcept {
    return std::min(deadline, now + command_timeout_);
  }

  /// The pause between two PINGs while down.
  duration probe_interval() const noexcept { return probe_interval_; }

private:
  duration command_timeout_;
  duration probe_interval_;
  bool down_ = false;
  time_point probe_due_{};
};

} // namespace sluice::policy
