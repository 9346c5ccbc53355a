#pragma once

// What the runtime needs at start (admission, call kinds, the backend), in
// a header of its own: it depends on nothing above policy but the
// admission and Redis settings, so the config file's types can hold it
// without the facade, CAF or the actors.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "sluice/runtime/admission_config.hpp"
#include "sluice/runtime/policy/call/call_policy.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/redis/config.hpp"

namespace sluice {

/// Everything the runtime needs at start.
struct runtime_config {
  admission_config admission;
  /// Call policies by kind. Defaults: "chat" (429 does not spend the retry
  /// budget) and "embeddings" (it does).
  std::map<std::string, policy::call_policy> kinds = default_kinds();
  /// Seeds jitter and weighted selection; 0 draws a random seed.
  uint64_t seed = 0;
  /// Scope progress in Redis, shared by several nodes (empty: kept in
  /// process, the default).
  std::optional<redis_config> redis;
  /// How long a scope's progress marker lives in Redis (far longer than
  /// any stall window).
  duration progress_ttl = std::chrono::hours{1};
  /// With `redis`: a cap on calls in flight across every node sharing the
  /// Redis key prefix, taken after this node's own tiers (0: none).
  uint32_t cluster_global_cap = 0;
  /// A cluster permit's lease lapses this long after its last renewal
  /// (renewed every third of it while held).
  duration lease_ttl = std::chrono::seconds{10};
  /// With `redis`: share breaker transitions with the other nodes (a
  /// breaker opened on one node opens on all; see actors/breaker_relay.hpp).
  bool share_breakers = true;
  /// With `redis`: the node's token limits and budgets are counted there,
  /// shared by the nodes; a call's reservation lapses this long after its
  /// last renewal (renewed every third of it while the call runs).
  duration spend_reservation_ttl = std::chrono::seconds{10};
  /// With `redis`, while it does not answer: count spend on this node
  /// alone (true, "open") or refuse calls under a spend limit (false,
  /// "closed", the default).
  bool spend_open_when_down = false;

  static std::map<std::string, policy::call_policy> default_kinds();
};

/// The rules of `runtime_config`'s backend settings (`progress_ttl` at
/// least 1 s, `lease_ttl` at least `min_lease_ttl`, a `cluster_global_cap`
/// only with `redis`), stated once: the facade applies them, and so does
/// the config reader, which names the key and line. Throws
/// `std::invalid_argument("field: problem")`.
void validate_backend(const runtime_config& cfg);

} // namespace sluice
