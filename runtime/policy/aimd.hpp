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
};

/// Throws `std::invalid_argument` naming the field of the first nonsense
/// setting.
void validate(const aimd_config& cfg);

/// A source's concurrency limit: additive increase on success, multiplicative
/// decrease on 429 and timeouts, always within [min, max].
///
/// It grows only while at least half the limit is in use (Netflix's rule):
/// an idle source proves nothing about a higher limit, and growing then would
/// let a burst through unchecked.
class aimd_limit {
public:
  /// `cfg` must pass `validate`.
  explicit aimd_limit(const aimd_config& cfg);

  uint32_t limit() const noexcept { return limit_; }

  const aimd_config& config() const noexcept { return cfg_; }

  /// New settings in place (a config reload): the limit reached so far
  /// stays, brought into [min, max]; `initial` matters no more. `cfg` must
  /// pass `validate`.
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
};

} // namespace sluice::policy
