#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// Where the cluster's permits are kept: a cap shared by every node, each
/// permit a lease with a TTL that its holder renews, so a node that dies
/// (kill -9) loses its permits within one TTL. The split follows Envoy's
/// `ResourceLimit`: the cluster tier actor decides who waits, in what
/// order and until when; the store only counts. Redis is behind it in a
/// node (runtime/redis/lease_pool.hpp), an in-memory fake in tests.
///
/// Called by one owner at a time (the cluster tier's actor). Every handler
/// is called exactly once, on any thread -- possibly before the call that
/// takes it returns.
class lease_store {
public:
  // -- member types -----------------------------------------------------------

  /// The answer to `try_acquire`.
  struct grant {
    /// The store answered (otherwise `error` says why: fail closed).
    bool answered = false;
    /// A permit was granted: `permit` is its id, unique cluster-wide.
    bool granted = false;
    std::string permit;
    std::string error;
    /// Unanswered because the store failed (unreachable, no answer in
    /// time): it is down, fail closed -- this waiter and those behind.
    bool fault = false;
    /// Unanswered because too little of the caller's wait was left to ask:
    /// its wait ran out (busy), nothing is wrong with the store.
    bool late = false;
    /// Answered full: when the earliest live permit lapses unless renewed
    /// (its holder may have died), if the store knows; zero otherwise.
    duration retry_in{};
  };

  /// The permits that `renew` found lapsed already (their holders lost
  /// them), or nothing if the store did not answer.
  using lapsed = std::optional<std::vector<std::string>>;

  // -- interface --------------------------------------------------------------

  virtual ~lease_store() = default;

  /// Takes a permit if fewer than the cap are live. The answer comes within
  /// `within` or sooner (then unanswered if the store was too slow).
  virtual void try_acquire(duration within, std::function<void(grant)> done)
      = 0;

  /// Gives `permit` back. Best effort: a permit the store cannot be told of
  /// lapses by itself within one TTL.
  virtual void release(const std::string& permit) = 0;

  /// Extends `permits` by one TTL from now.
  virtual void renew(std::vector<std::string> permits,
                     std::function<void(lapsed)> done)
      = 0;

  /// Whether the store is unreachable now: acquires fail at once (fail
  /// closed), without queueing, until it answers again.
  virtual bool down() const = 0;

  /// How long a permit lives without renewal.
  virtual duration ttl() const = 0;

  /// Registers `wake`, called (on any thread, possibly never) when another
  /// holder gave a permit back while the cap was reached: waiters may ask
  /// again now rather than at their next timer. Set once, by the owner,
  /// before its first question. The default store has no such notices.
  virtual void on_freed(std::function<void()> wake) { (void)wake; }
};

} // namespace sluice
