#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/redis_client.hpp"

namespace sluice {

/// A cluster-wide cap kept in Redis: each permit is a *lease* with a TTL,
/// in one sorted set (`<prefix>leases:<name>`, score = expiry by the
/// server's clock). Every operation is one Lua script, atomic on the
/// server: expired leases are dropped, then the cap is checked and the
/// lease added in the same step -- no read-then-write race between nodes.
/// A holder renews its leases while it holds them; a node that dies
/// (kill -9) stops renewing, and its leases lapse within one TTL.
///
/// Blocking (hiredis): use it from one thread, the cluster tier's own.
class lease_pool {
public:
  /// `node` names this node in lease ids (unique per process).
  lease_pool(redis_client& redis, std::string name, uint32_t cap,
             duration ttl, std::string node);

  struct outcome {
    /// Redis answered (otherwise `error` says why: fail closed).
    bool answered = false;
    /// A lease was granted (`lease` is its id).
    bool granted = false;
    std::string lease;
    std::string error;
  };

  /// Takes a lease if fewer than `cap` live leases exist.
  outcome try_acquire();

  /// Gives a lease back; false if Redis could not be told (it then lapses
  /// by itself within one TTL).
  bool release(const std::string& lease);

  /// Extends the given leases by one TTL from now. Returns the ones that
  /// had lapsed already (gone: their holders lost them), or nothing if
  /// Redis did not answer.
  std::optional<std::vector<std::string>>
  renew(const std::vector<std::string>& leases);

  /// Live leases in the cluster right now, or -1 if Redis did not answer.
  int64_t live();

  uint32_t cap() const noexcept { return cap_; }
  duration ttl() const noexcept { return ttl_; }

private:
  redis_client& redis_;
  std::string key_;
  uint32_t cap_;
  duration ttl_;
  std::string node_;
  uint64_t next_ = 1;
};

} // namespace sluice
