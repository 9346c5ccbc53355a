#pragma once

#include <atomic>
#include <cstdint>

namespace sluice::policy {

/// The counts of one admission tier: permits in use and waiters queued, packed
/// into one 64-bit word so that "is anybody queued?" and "take a permit" are
/// decided by a single atomic operation.
///
/// This is the lock-free fast path of a tier. A caller takes a permit with
/// `try_acquire()` only when nobody is queued, so queued waiters keep their
/// FIFO order: once a waiter is registered with `add_waiter()`, newcomers go
/// to the owner's queue too. The owner hands freed permits to its queue head
/// with `try_grant_waiter()`. `release()` tells the caller whether waiters are
/// queued, in which case the owner must be woken.
///
/// No wakeup is lost: registration and release are read-modify-write
/// operations on the same word, so either the release sees the waiter (and
/// wakes the owner), or the owner's grant attempt after registering sees the
/// freed permit.
///
/// NOTE: a caller whose fast-path attempt raced with a registration may still
/// take a permit ahead of that waiter; the window is one CAS wide and harmless
/// (no permit is lost, the cap holds).
class tier_counter {
public:
  /// Largest accepted cap: counts live in 32-bit halves.
  static constexpr uint32_t max_cap = (uint32_t{1} << 31) - 1;

  /// A consistent view of both counts.
  struct snapshot {
    uint32_t in_use;
    uint32_t waiting;
  };

  /// Creates a counter for `cap` permits; `cap` must be in [1, max_cap].
  explicit tier_counter(uint32_t cap);

  tier_counter(const tier_counter&) = delete;
  tier_counter& operator=(const tier_counter&) = delete;

  uint32_t cap() const noexcept { return cap_.load(std::memory_order_relaxed); }

  /// Changes the cap (a source tier's AIMD limit moves). Lowering it below
  /// the permits in use takes effect as they come back; no permit is revoked.
  /// `cap` must be in [1, max_cap].
  void set_cap(uint32_t cap) noexcept {
    cap_.store(cap, std::memory_order_relaxed);
  }

  snapshot load() const noexcept {
    return unpack(word_.load(std::memory_order_acquire));
  }

  /// Takes a permit if nobody is queued and one is free.
  bool try_acquire() noexcept;

  /// Registers one queued waiter (closes the fast path to newcomers).
  void add_waiter() noexcept;

  /// Moves one registered waiter to "holding a permit" if one is free.
  bool try_grant_waiter() noexcept;

  /// Unregisters a waiter that leaves without a permit.
  void remove_waiter() noexcept;

  /// Returns one permit. Never takes the count below zero.
  /// @returns whether waiters are queued (the owner must be woken).
  bool release() noexcept;

  /// Returns a fresh identifier for a permit of this tier.
  uint64_t next_permit_id() noexcept {
    return next_id_.fetch_add(1, std::memory_order_relaxed);
  }

private:
  static constexpr uint64_t waiter_unit = uint64_t{1} << 32;

  static snapshot unpack(uint64_t w) noexcept {
    return {static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32)};
  }

  std::atomic<uint32_t> cap_;
  std::atomic<uint64_t> word_{0};
  std::atomic<uint64_t> next_id_{1};
};

} // namespace sluice::policy
