#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/runtime/redis/client.hpp"

namespace sluice {

/// What the Redis backend has seen go wrong.
struct redis_backend_stats {
  /// Progress writes that failed (telemetry: the calls went on).
  std::atomic<uint64_t> write_errors{0};
  /// Progress reads that failed (each failed its call closed).
  std::atomic<uint64_t> read_errors{0};
};

/// Spawns the Redis scope-state backend (the protocol of
/// actors/scope_backend.hpp), which several nodes share: the progress
/// marker of a scope is one key (`<prefix>progress:<scope>`), written with
/// the server's clock on success and kept `progress_ttl` (far longer than
/// any stall window). A missing key is +infinity. Redis unreachable, slow
/// or failing makes `progress_age` fail with `governance_backend_error`
/// (fail-closed); a failed progress write is only counted. A read is
/// answered within one command timeout of its request, queueing included;
/// after a fault (no answer in time, connection refused or closed) Redis is
/// *down* and reads fail at once, without queueing, until a PING every
/// `reconnect_after` is answered. It reconnects by itself. Redis has a
/// thread of its own (hiredis blocks); the actor never waits on it. Throws
/// `std::invalid_argument` naming the field of nonsense settings.
caf::actor
spawn_redis_scope_backend(caf::actor_system& sys, redis_config cfg,
                          duration progress_ttl = std::chrono::hours{1},
                          std::shared_ptr<redis_backend_stats> stats = nullptr);

} // namespace sluice
