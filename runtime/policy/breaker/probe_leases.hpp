#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

class breaker_policy;

/// A half-open probe in flight: which call holds it and when it lapses.
struct probe_lease {
  /// Never reused by one breaker; 0 means "no lease".
  uint64_t id = 0;
  /// Who holds it (the caller's actor id; monitored by the breaker).
  uint64_t holder = 0;
  time_point expires{};
};

/// The answer to "may this call probe?" in half-open.
struct probe_grant {
  enum class verdict : uint8_t {
    /// Probe, holding `lease`.
    granted,
    /// Every probe is taken (or the caller cannot hold one): ask again at
    /// `retry_at`.
    refused,
    /// Shared with other nodes and this node's cluster probe lease lapsed:
    /// claim it first; ask again at `retry_at`.
    claim_first,
  };
  verdict what = verdict::refused;
  probe_lease lease{};
  time_point retry_at{};
};

/// What the breaker does with the answer to its claim of the cluster's
/// probe lease (SPEC §2, one probe per cluster).
struct claim_verdict {
  enum class action : uint8_t {
    /// The breaker moved on while the claim was out (another generation,
    /// closed, isolated): that transition armed what it needs.
    ignore,
    /// Ours (or Redis did not answer: decide alone): half-open now.
    half_open,
    /// Another node probes: stay open until `until`, then claim again.
    hold_until,
  };
  action what = action::ignore;
  time_point until{};
};

/// The half-open probe leases of one breaker, and its claim of the
/// cluster's probe lease when breakers are shared between nodes. No actors,
/// clocks or timers: the breaker arms a timer per granted lease and tells
/// `expire`, and monitors the holders and tells `drop_holder`.
///
/// A lease lapses after one open period, so a hung probe delays recovery by
/// at most that; a holder that dies frees its lease at once.
class probe_leases {
public:
  /// What a claim that is refused meanwhile is told to wait (it is woken
  /// earlier by a transition, if any).
  static constexpr duration claim_wait = std::chrono::milliseconds{100};

  /// A call asks to probe a half-open breaker. `holder`: the caller (none:
  /// an anonymous ask, which can never hold a lease). `limit`: the probes
  /// allowed at once; `period`: the open duration (a lease's life).
  /// `shared`: the breaker claims the cluster's probe lease through another
  /// node's relay.
  probe_grant try_grant(std::optional<uint64_t> holder, time_point now,
                        uint32_t limit, duration period, bool shared);

  /// The lease `id`, if it is still live.
  const probe_lease* find(uint64_t id) const noexcept;

  /// Gives lease `id` back (its outcome arrived, or its timer fired);
  /// returns its holder, if it was live.
  std::optional<uint64_t> release(uint64_t id);

  /// `holder` died: every lease it held is free.
  void drop_holder(uint64_t holder);

  /// The breaker left half-open: every lease ends. Returns the holders
  /// that held one (each once).
  std::vector<uint64_t> clear();

  /// Whether `holder` holds any lease.
  bool holds(uint64_t holder) const noexcept;

  size_t size() const noexcept { return leases_.size(); }

  /// The earliest lease expiry, or `fallback` if none is sooner.
  time_point soonest(time_point fallback) const noexcept;

  /// Whether to send a claim for `generation` now: one claim per
  /// generation at a time (a claim of an older generation no longer
  /// counts). True marks the claim out.
  bool should_claim(uint64_t generation);

  /// The answer to the claim sent for `claimed_for`: `left` is zero when
  /// this node took the cluster's lease, the holder's remaining time when
  /// another node holds it, negative when Redis did not answer. `m` is the
  /// breaker's state now. On `half_open` this node may probe for one open
  /// period.
  claim_verdict on_claim(uint64_t claimed_for, duration left, time_point now,
                         const breaker_policy& m);

  /// Whether this node's cluster probe lease has lapsed by `now`.
  bool cluster_lease_lapsed(time_point now) const noexcept {
    return deadline_passed(cluster_until_, now);
  }

private:
  std::vector<probe_lease> leases_;
  uint64_t next_id_ = 1;
  std::optional<uint64_t> claim_for_;
  time_point cluster_until_{};
};

} // namespace sluice::policy
