#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace sluice::policy {

/// What a call does when the budget has no retry for it now.
enum class when_budget_spent : uint8_t {
  /// Waits, unproductive time on its stall budget, and asks again.
  wait,
  /// Ends at once: `all_sources_exhausted`, reason `retry_budget`.
  fail,
};

/// A retry budget across the calls of one route (Envoy's `retry_budget`):
/// retries in flight may be at most `percent` of the route's active calls,
/// and never fewer than `min_concurrency`, so a failing upstream cannot
/// multiply the load the route puts on it by the retry count.
struct retry_budget_config {
  /// Share of active calls that may be retrying at once, in [0, 100].
  double percent = 20;
  /// Retries allowed in flight whatever the share says (a quiet route
  /// still retries); at least 1.
  uint32_t min_concurrency = 3;
  when_budget_spent when_spent = when_budget_spent::wait;
};

/// Throws `field_error` naming `percent` or `min_concurrency`.
void validate(const retry_budget_config& cfg);

/// The counts of one route's budget, shared by its governors (any thread).
///
/// Counted once each, so the base of the share is not inflated by retries
/// (Envoy #30205 counted inconsistently): an *active call* is a call
/// admitted and not yet finished, however many attempts it makes; a *retry
/// in flight* is a call whose current attempt is not its first, from the
/// round that starts it until that attempt's answer. Both counts live in
/// one atomic word: a retry is granted against the active count it read.
/// The guards return what they hold when destroyed, so a governor killed
/// mid-call leaves nothing counted.
class retry_budget : public std::enable_shared_from_this<retry_budget> {
public:
  explicit retry_budget(retry_budget_config cfg);

  retry_budget(const retry_budget&) = delete;
  retry_budget& operator=(const retry_budget&) = delete;

  const retry_budget_config& config() const noexcept { return cfg_; }

  /// Holds one count (an active call, or a retry in flight) until reset or
  /// destroyed.
  class hold {
  public:
    hold() = default;
    hold(hold&& other) noexcept;
    hold& operator=(hold&& other) noexcept;
    hold(const hold&) = delete;
    hold& operator=(const hold&) = delete;
    ~hold() { reset(); }

    explicit operator bool() const noexcept { return budget_ != nullptr; }

    /// Returns the count now.
    void reset() noexcept;

  private:
    friend class retry_budget;
    hold(std::shared_ptr<retry_budget> budget, uint64_t unit) noexcept
        : budget_(std::move(budget))
        , unit_(unit) {
      // nop
    }

    std::shared_ptr<retry_budget> budget_;
    uint64_t unit_ = 0;
  };

  /// A call was admitted: counted active until the hold goes.
  hold call_started();

  /// A retry, if the budget has one now: counted in flight until the hold
  /// goes. An empty hold when `retrying >= allowed(active)`.
  hold try_retry();

  /// Retries allowed in flight with `active` calls.
  uint32_t allowed(uint32_t active) const noexcept;

  struct snapshot {
    uint32_t active;
    uint32_t retrying;
    /// Refusals so far (a waiting call is refused again at each poll).
    uint64_t refused;
  };

  snapshot load() const noexcept;

private:
  static constexpr uint64_t retry_unit = uint64_t{1} << 32;

  retry_budget_config cfg_;
  /// Low half: active calls; high half: retries in flight.
  std::atomic<uint64_t> word_{0};
  std::atomic<uint64_t> refused_{0};
};

} // namespace sluice::policy
