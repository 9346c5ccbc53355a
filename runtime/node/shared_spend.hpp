#pragma once

// The node's spend limits kept in Redis (SPEC §12), shared by every node on
// the backend's key prefix: a call's reservation in all its limits is one
// script, asked on a Redis connection and thread of its own (hiredis
// blocks; no event loop waits on it), and so is its settlement. While a
// call runs its reservation is renewed every third of its TTL; a node
// killed with -9 leaks none beyond one TTL. Settlements Redis could not
// take are kept (up to `max_unsettled`) and sent again: what a call used
// is counted late, not lost.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/runtime/redis/client.hpp"
#include "sluice/runtime/redis/shared_limits.hpp"

namespace sluice::node {

class shared_spend {
public:
  /// Settlements kept for a retry while Redis does not take them; beyond,
  /// the oldest is dropped (and counted).
  static constexpr size_t max_unsettled = 10'000;

  /// Reservations renewed in one script.
  static constexpr size_t renew_batch = 256;

  /// How long the stop waits for the settlements still queued.
  static constexpr duration shutdown_drain = std::chrono::seconds{2};

  /// `open_when_down`: while Redis is down, the node counts alone (its own
  /// limits, as without Redis) instead of refusing calls.
  shared_spend(redis_config cfg, duration reservation_ttl, bool open_when_down);
  ~shared_spend();

  shared_spend(const shared_spend&) = delete;
  shared_spend& operator=(const shared_spend&) = delete;

  bool open_when_down() const noexcept { return open_when_down_; }

  /// Reserves in `limits`; `done` is called once, on Redis's thread (or on
  /// the caller's, at once, while Redis is down), with Redis's answer or
  /// `answered` false and why.
  void reserve(std::vector<shared_limit> limits,
               std::function<void(shared_limits::outcome)> done);

  /// Settles `reservation` (granted by `reserve`) with what the call used
  /// (each limit's `amount`); a zero use gives it back.
  void settle(const std::string& reservation, std::vector<shared_limit> used);

  /// The most limits one /status reads from Redis (the rest show this
  /// node's own count).
  static constexpr size_t max_read_limits = 1024;

  /// What Redis counts in `limits` now (`shared_limits::read_many`), or
  /// nothing; `done` is called once, on Redis's thread or at once.
  void
  read(std::vector<shared_limit> limits,
       std::function<void(std::optional<std::vector<shared_limits::counts>>)>
           done);

  /// For /status and /metrics.
  struct stats {
    std::atomic<uint64_t> reserves{0};
    std::atomic<uint64_t> refusals{0};
    /// Reservations Redis did not answer.
    std::atomic<uint64_t> errors{0};
    /// Settlements sent again, and dropped for want of room.
    std::atomic<uint64_t> settle_retries{0};
    std::atomic<uint64_t> settle_dropped{0};
    /// Held reservations Redis said had lapsed at a renewal.
    std::atomic<uint64_t> lapsed{0};
  };
  const stats& counters() const noexcept;
  /// Reservations of this node's calls in flight now.
  size_t held() const;
  bool down() const noexcept;

private:
  struct core;
  std::shared_ptr<core> core_;
  bool open_when_down_;
  /// Renews the held reservations and sends kept settlements again.
  std::thread renewer_;
};

} // namespace sluice::node
