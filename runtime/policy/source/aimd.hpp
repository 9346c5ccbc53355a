#pragma once

#include <cstdint>

#include "sluice/runtime/policy/outcome.hpp"

namespace sluice::policy {

/// Settings of an AIMD concurrency limit.
struct aimd_config {
  uint32_t initial = 16;
  uint32_t min = 1;
  uint32_t max = 256;
  /// Added per success while the source is well used.
  uint32_t increase = 1;
  /// Multiplied on a drop (429, timeout), in (0, 1).
  double decrease_ratio = 0.5;
  /// Until the first drop, a success lifts the limit straight to twice the
  /// calls it saw in flight (when that is more than `increase` would add):
  /// see `aimd_limit`.
  bool slow_start = true;
};

/// Throws `std::invalid_argument` naming the field of the first nonsense
/// setting.
void validate(const aimd_config& cfg);

/// A source's concurrency limit: additive increase on success, multiplicative
/// decrease on 429 and timeouts, always within [min, max].
///
/// It grows only while at least half the limit is in use (Netflix's rule):
/// an idle source proves nothing about a higher limit, and growing then would
/// let a burst through unchecked. So the highest limit a steady `n` calls in
/// flight can push it to is about `2 n`.
///
/// Slow start (TCP's, and its `ssthresh` of "the first loss"): until the
/// first drop, a success with `in_flight` calls running lifts the limit to
/// `2 × in_flight` at once when that is more than one `increase` -- to
/// where the additive rule would climb anyway at that load, in one step
/// instead of one per success. A healthy upstream under 64 callers goes
/// 16 → 32 → 64 → 128 in three successes (the additive rule took 48 to
/// reach 64). The first drop (429 or timeout) ends slow start for good: the
/// upstream has shown where its edge is, and from there the limit creeps.
///
/// NOTE: "additive" is per success, not per round trip as in TCP's
/// congestion avoidance: while the limit is fully used, a limit's worth of
/// successes (one round) still doubles it. Slow start makes the first climb
/// take a few successes instead of a round trip per doubling; it does not
/// raise the ceiling (`2 × in_flight`, `max`).
class aimd_limit {
public:
  /// `cfg` must pass `validate`.
  explicit aimd_limit(const aimd_config& cfg);

  uint32_t limit() const noexcept { return limit_; }

  const aimd_config& config() const noexcept { return cfg_; }

  /// Whether the limit still grows by slow start (no drop seen yet, and
  /// `slow_start` set).
  bool in_slow_start() const noexcept { return cfg_.slow_start && !dropped_; }

  /// New settings in place (a config reload): the limit reached so far
  /// stays, brought into [min, max]; `initial` matters no more, and a drop
  /// seen before still ends slow start (a reload proves nothing about the
  /// upstream). `cfg` must pass `validate`.
  void reconfigure(const aimd_config& cfg);

  /// A call succeeded while `in_flight` calls (including it) were running.
  void on_success(uint32_t in_flight) noexcept;

  /// The source pushed back (429) or timed out.
  void on_drop() noexcept;

  /// An attempt ended as `kind` while `in_flight` ran (including it): the
  /// one place that says which outcomes move the limit. Success grows it; a
  /// 429 or a timeout is a drop (the source says it has too much); other
  /// failures (a refused connection, a 5xx, a permanent error) say nothing
  /// about its concurrency and leave it.
  void on_outcome(outcome_kind kind, uint32_t in_flight) noexcept;

private:
  aimd_config cfg_;
  uint32_t limit_;
  /// A drop was seen: slow start is over.
  bool dropped_ = false;
};

} // namespace sluice::policy
