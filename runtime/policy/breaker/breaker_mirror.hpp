#pragma once

#include <atomic>
#include <cstdint>

#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

namespace sluice::policy {

/// A lock-free copy of a breaker's state and generation, readable from any
/// thread (HTTP threads, selectors) without a message to the breaker actor.
///
/// The breaker writes it *after* its authoritative state, with release
/// ordering; readers load it with acquire ordering. So a reader that sees
/// `open` at generation g sees everything the breaker did up to entering g:
/// the authoritative state was open at that moment or is at a later
/// generation now. The mirror may lag the actor, never lead it.
class breaker_mirror {
public:
  struct snapshot {
    breaker_state state;
    uint64_t generation;
  };

  /// Called by the breaker's owner only, after its state changed.
  void publish(breaker_state s, uint64_t generation) noexcept {
    word_.store(generation << 8 | static_cast<uint64_t>(s),
                std::memory_order_release);
  }

  snapshot load() const noexcept {
    auto w = word_.load(std::memory_order_acquire);
    return {static_cast<breaker_state>(w & 0xff), w >> 8};
  }

  /// One atomic load: whether calls to this source are cut off right now.
  bool is_open() const noexcept {
    return (word_.load(std::memory_order_acquire) & 0xff) ==
           static_cast<uint64_t>(breaker_state::open);
  }

private:
  std::atomic<uint64_t> word_{uint64_t{1} << 8 |
                              static_cast<uint64_t>(breaker_state::closed)};
};

} // namespace sluice::policy
