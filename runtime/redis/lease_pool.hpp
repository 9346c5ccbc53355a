#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/actors/lease_store.hpp"
#include "sluice/runtime/redis/client.hpp"

namespace sluice {

/// The least TTL a lease may have: holders renew every third of it, over a
/// network, with command timeouts of their own.
constexpr duration min_lease_ttl = std::chrono::milliseconds{100};

/// Throws `std::invalid_argument` naming the field of a nonsense cap or
/// TTL (`cluster_global_cap`, `lease_ttl`): the one check of both.
void validate_lease_limits(uint32_t cap, duration ttl);

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

  /// What `try_acquire` found: the cluster tier's `grant` (`permit` is the
  /// lease id; never `late`, which only the store decides).
  using outcome = lease_store::grant;

  /// Takes a lease if fewer than `cap` live leases exist; when full, says
  /// when the earliest lease lapses unless renewed (`retry_in`).
  outcome try_acquire();

  /// Gives a lease back; false if Redis could not be told (it then lapses
  /// by itself within one TTL). If the cap was reached, publishes this
  /// node's name on `freed_channel()`.
  bool release(const std::string& lease);

  /// Extends the given leases by one TTL from now. Returns the ones that
  /// had lapsed already (gone: their holders lost them), or nothing if
  /// Redis did not answer.
  std::optional<std::vector<std::string>>
  renew(const std::vector<std::string>& leases);

  /// Live leases in the cluster right now, or -1 if Redis did not answer.
  int64_t live();

  /// Where a release publishes (the releasing node's name) when the cap
  /// was reached: `<prefix>leases:<name>:freed`.
  std::string freed_channel() const { return key_ + ":freed"; }

  const std::string& node() const noexcept { return node_; }

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

/// Makes the cluster tier's `lease_store` over Redis: a `lease_pool`
/// named `name` with `cap` and `ttl`, worked by a connection on a thread of
/// its own (hiredis blocks; the store's owner never does). Each question
/// waits at most one command timeout and at most its `within`; a fault
/// marks Redis down (see `redis_worker`). Destroying the store joins its
/// thread: at most one command timeout. Another node's release while the
/// cap was reached reaches `on_freed` through a subscription of its own
/// (a second connection and thread). Throws `std::invalid_argument`
/// naming the field of nonsense settings. The thread holds `sys`, the
/// actor system of the cluster tier it answers, while it runs (see
/// `redis_worker`).
std::shared_ptr<lease_store>
make_redis_lease_store(caf::actor_system& sys, redis_config cfg,
                       std::string name, uint32_t cap, duration ttl);

} // namespace sluice
