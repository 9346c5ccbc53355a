#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/actors/breaker.hpp"
#include "sluice/actors/direct_attempts.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"
#include "sluice/runtime/policy/source/aimd.hpp"
#include "sluice/runtime/policy/source/token_bucket.hpp"
#include "sluice/runtime/policy/spend/provider_headroom.hpp"

namespace sluice {

/// A source's rate quota, shared by every governor that calls the source.
/// Taken synchronously under a short lock (no message), like the source
/// tier's permits.
class source_quota {
public:
  source_quota(const policy::quota_config& cfg, time_point now)
      : bucket_(cfg, now) {
    // nop
  }

  bool try_take(time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    return bucket_.try_take(now);
  }

  time_point next_token(time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    return bucket_.next_token(now);
  }

private:
  std::mutex mx_;
  policy::token_bucket bucket_;
};

/// What a source's upstream has left of its own rate limits, as its
/// answers' headers said (SPEC §12; `policy::provider_headroom`), shared by
/// every governor that calls the source, under a short lock like the quota.
class source_headroom {
public:
  /// Whether a call of `tokens` may be sent now (counted when not).
  policy::provider_headroom::verdict check(uint64_t tokens, time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    auto v = room_.check(tokens, now);
    if (!v.go)
      ++held_back_;
    return v;
  }

  /// A call of `tokens` goes now: counted as sent until `answered` or
  /// `abandoned` (with the count this returns).
  uint64_t sent(uint64_t tokens, time_point now) {
    std::lock_guard<std::mutex> guard{mx_};
    return room_.sent(tokens, now);
  }

  void answered(uint64_t tokens, const policy::provider_limits& limits,
                time_point now) {
    if (!limits.empty())
      seen_limits_.store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> guard{mx_};
    room_.answered(tokens, limits, now);
  }

  void abandoned(uint64_t tokens) {
    std::lock_guard<std::mutex> guard{mx_};
    room_.abandoned(tokens);
  }

  /// An answer has said something of the upstream's limits: calls' token
  /// estimates are worth making.
  bool seen_limits() const noexcept {
    return seen_limits_.load(std::memory_order_relaxed);
  }

  /// For /status.
  struct figures {
    std::optional<uint64_t> requests_left;
    std::optional<uint64_t> tokens_left;
    uint64_t requests_in_flight = 0;
    uint64_t tokens_in_flight = 0;
    /// Calls held back (each time one was).
    uint64_t held_back = 0;
  };
  figures read(time_point now) const {
    std::lock_guard<std::mutex> guard{mx_};
    return {room_.requests_left(now), room_.tokens_left(now),
            room_.requests_in_flight(), room_.tokens_in_flight(), held_back_};
  }

private:
  mutable std::mutex mx_;
  policy::provider_headroom room_;
  uint64_t held_back_ = 0;
  std::atomic<bool> seen_limits_{false};
};

/// Everything the runtime keeps for one source: the source actor, its
/// breaker, and its source tier -- a concurrency cap moved by AIMD, taken
/// lock-free like an admission tier (no queue: a governor that finds it full
/// tries another source or waits, which is stall time).
struct source_handle {
  std::string name;
  source_actor actor;
  breaker_handle breaker;
  /// Permits of the source tier; its cap is the AIMD limit.
  std::shared_ptr<policy::tier_counter> tier;
  /// Owns the AIMD limit; tells watchers when a permit frees.
  caf::actor gate;
  /// Optional rate quota (null: none).
  std::shared_ptr<source_quota> quota;
  /// The upstream's own rate limits, as its answers said (null: not
  /// obeyed).
  std::shared_ptr<source_headroom> headroom;
  /// A built-in source that times its attempts itself
  /// (`call_request::timeout`) and understands `(cancel_atom)`: governors
  /// ask it directly. Others get each attempt from a short-lived runner
  /// actor that the governor times and kills (see messages/source.hpp).
  bool self_timed = false;
  /// A built-in source on the loop scheduler whose attempts the governor
  /// starts itself on its own loop (expired: ask `actor`).
  std::weak_ptr<direct_attempts> direct;
  /// The upstream's own name for models the clients name (null: none);
  /// the governor rewrites the `model` of each attempt's body with it.
  std::shared_ptr<const std::map<std::string, std::string>> model_names;
  /// Keeps the source in service: once a reload has taken it out of the
  /// runtime, its actors stop when the last copy of this handle (the plans
  /// of calls that started before the reload) is gone (null: the runtime's
  /// destructor stops them).
  std::shared_ptr<const void> lifetime{};
};

/// A config reload's new AIMD settings for a running gate: the limit
/// reached stays, brought into the new [min, max]
/// (`policy::aimd_limit::reconfigure`). Throws `std::invalid_argument`
/// naming the field of nonsense settings, before sending anything.
void reconfigure_gate(const caf::actor& gate, const policy::aimd_config& aimd);

/// Spawns the gate of source `name`: the owner of its AIMD limit (the cap
/// of `tier`), which it moves on each attempt's outcome, and of the
/// watchers it tells when a permit frees. Protocol:
/// - `(aimd_atom, outcome_kind, uint32_t in_flight)`: an attempt ended;
/// - `(watch_atom)`: the sender is told (`wake_atom`) of the next freed
///   permit, once;
/// - `(wake_atom)`: a permit came back outside an outcome;
/// - `(status_atom) -> gate_status`.
/// Throws `std::invalid_argument` naming the field of nonsense `aimd`.
caf::actor spawn_source_gate(caf::actor_system& sys, std::string name,
                             std::shared_ptr<policy::tier_counter> tier,
                             const policy::aimd_config& aimd);

} // namespace sluice
