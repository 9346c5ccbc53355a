#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "runtime/policy/backoff.hpp"
#include "runtime/policy/time.hpp"

namespace sluice::policy {

/// How the governor treats one kind of call (chat, embeddings, OCR, ...):
/// its two budgets and its pacing (SPEC §3).
struct call_policy {
  /// Retry budget: real attempts that failed (transient, timeout; and 429 when
  /// `rate_limit_spends_retry`) before `retry_exhausted`.
  uint32_t max_attempts = 3;
  /// Stall budget: unproductive waiting before the stall verdict.
  duration stall_window = std::chrono::seconds{300};
  backoff_config backoff;
  /// No-runnable-source poll interval p (each wait is in [0.5p, 1.0p]).
  duration poll_interval = std::chrono::seconds{1};
  /// Whether a 429 spends the retry budget. Chat in the seed: no (429 is
  /// load, governed by the stall budget); embeddings and OCR: yes.
  bool rate_limit_spends_retry = false;
  /// Longest single attempt; its time is productive.
  duration attempt_timeout = std::chrono::seconds{300};
  /// Longest wait for the first byte of a streamed answer (optional).
  std::optional<duration> ttft_timeout;
};

/// Throws `std::invalid_argument` naming the field of the first nonsense
/// setting. Keeps the seed's conservative check `stall_window >=
/// ttft_timeout` (redundant now that TTFT is productive time, but harmless).
void validate(const call_policy& cfg);

} // namespace sluice::policy
