#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/tier_owner.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// The tiers one call is admitted through, in acquisition order.
struct admission_path {
  tier_handle session;
  tier_handle connection;
  tier_handle global;
  /// A tier shared by a group of sessions (the node: a client key, whose
  /// `X-Session-Id` sub-sessions are capped each and together), taken right
  /// after the session's own. Its kind is `session`: a wait on it that runs
  /// past the deadline is `tool_busy` tier session. Empty: none.
  std::optional<tier_handle> group{};

  /// The tier of kind `k` (for `session`: the session's own, not the group).
  const tier_handle& operator[](tier_kind k) const noexcept;
};

/// Most tiers on one admission path: session, group, connection, global.
constexpr size_t max_admission_steps = tier_count + 1;

/// The permits one call holds. Lives in the holding actor's state.
///
/// Release it on completion and on error with `release(self)`. If the holder
/// terminates instead (cancelled, killed, crashed), every tier gets its
/// permit back by itself: each tier observes its holders.
class admission_ticket {
public:
  /// Returns every permit still held. Idempotent; must be called by (or with)
  /// the actor that acquired the permits.
  void release(caf::abstract_actor* holder) noexcept;

  /// Whether a permit of tier `k` is held.
  bool holds(tier_kind k) const noexcept;

  /// Number of permits held (0 to 4).
  size_t held() const noexcept;

  /// The one admission deadline its permits were taken under (`admit`
  /// computes it once). A tier asked later for the same call -- the
  /// cluster's global tier -- waits until this instant, not a deadline of
  /// its own.
  time_point deadline() const noexcept { return deadline_; }

  /// Sets the deadline (used by `admit`).
  void set_deadline(time_point t) noexcept { deadline_ = t; }

  /// Records permit `id` of `tier`, taken at step `step` of the path's
  /// acquisition order (used by `admit`).
  void add(size_t step, const tier_handle& tier, permit_id id);

private:
  struct held_permit {
    tier_handle tier;
    permit_id id;
  };

  /// By acquisition step.
  std::array<std::optional<held_permit>, max_admission_steps> permits_;
  time_point deadline_{};
};

/// How far one admission has got: which permits it took so far and which
/// tier it is queued at. Read in the holder's context (status reports).
class admission_progress {
public:
  /// Whether a permit of tier `k` is taken (until the outcome is delivered).
  bool holds(tier_kind k) const noexcept { return ticket_.holds(k); }

  /// The tier whose queue the call is in, if it is waiting.
  std::optional<tier_kind> waiting_on() const noexcept { return waiting_on_; }

  /// Whether the outcome was delivered.
  bool finished() const noexcept { return finished_; }

  /// The admission's one deadline: `now + wait_timeout` at `admit`.
  time_point deadline() const noexcept { return ticket_.deadline(); }

protected:
  admission_ticket ticket_;
  std::optional<tier_kind> waiting_on_;
  bool finished_ = false;
};

/// Receives the outcome of `admit`: the ticket, or `tool_busy` naming the
/// tier whose wait ran past the deadline (any permits already taken are
/// returned first), or another error if a tier owner is gone.
using admission_callback = std::function<void(caf::expected<admission_ticket>)>;

/// Admits the call run by `self` through `path`: session, then its group (if
/// any), then connection, then global, all under one deadline `now +
/// wait_timeout`, read from the clock here and nowhere else (the ticket
/// hands it on: `admission_ticket::deadline`). The longest wait is one
/// `wait_timeout`, however the waiting is spread over the tiers.
///
/// A tier with a free permit and nobody queued is taken without a message;
/// otherwise `self` joins that tier's FIFO queue. `done` runs in `self`'s
/// context, synchronously if no tier made it wait. If `self` terminates while
/// waiting, `done` never runs and everything taken comes back. The returned
/// progress may be kept to report where the call is.
std::shared_ptr<const admission_progress> admit(caf::event_based_actor* self,
                                                const admission_path& path,
                                                duration wait_timeout,
                                                admission_callback done);

/// `admit` for a caller that keeps no progress report (a governor): the
/// same tiers, order, deadline and outcome, but when no tier makes the call
/// wait -- the common case -- nothing is allocated for the admission and
/// `done` runs before this returns, as the last thing it does. Otherwise
/// the path is copied: it need not outlive this call.
void admit_call(caf::event_based_actor* self, const admission_path& path,
                duration wait_timeout, admission_callback done);

} // namespace sluice
