#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/runtime/policy/spend/token_window.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/redis/client.hpp"

namespace sluice {

/// A limit in tokens over a sliding period, shared by every node on one
/// Redis key prefix (SPEC §12): `policy::token_window`'s rule -- a
/// reservation is granted only if the used tokens in the window, the
/// reservations in flight and the new estimate fit the limit; a token
/// counts for at least the whole period -- kept in Redis, each step one
/// Lua script on the server's clock, so that no node reads a stale count
/// (the limit holds across nodes, not limit x nodes).
///
/// Keys, under `<prefix>tokens:<name>`: `:used` (a hash, bucket index ->
/// tokens; buckets of period / 60 on the server's clock), `:held` (a sorted
/// set, reservation -> its lapse) and `:amounts` (a hash, reservation ->
/// tokens, and `#` their sum). A reservation lapses `reservation_ttl` after
/// it was made or last renewed: a node killed with -9 leaks none beyond
/// that. Every key expires when unused for a period and a TTL.
///
/// Blocking (hiredis): use it from one thread, its owner's.
class token_ledger {
public:
  /// The largest limit, and the most tokens one settle counts (a usage
  /// beyond is counted as this): Lua writes numbers past 10^14 in
  /// exponent form, which Redis's counters refuse.
  static constexpr uint64_t max_tokens = 1'000'000'000'000;

  /// The shortest period: a bucket must be at least a millisecond.
  static constexpr duration min_period =
      std::chrono::milliseconds{policy::token_window_buckets};

  /// `node` names this node in reservation ids (unique per process).
  /// Throws `field_error` for a limit of 0 or over `max_tokens` (`limit`),
  /// a period under
  /// `min_period` (`period`) or a TTL under 100 ms (`reservation_ttl`).
  token_ledger(redis_client& redis, std::string name, uint64_t limit,
               duration period, duration reservation_ttl, std::string node);

  struct outcome {
    /// Redis answered (else `error`, and `grant` says nothing).
    bool answered = false;
    policy::token_window::grant grant;
    /// The reservation's id, when granted: settle or renew it by this.
    std::string reservation;
    std::string error;
  };

  /// Reserves `n` tokens.
  outcome reserve(uint64_t n);

  /// The call of `reservation` ended having used `used` tokens: its
  /// reservation is freed (if it has not lapsed) and `used` counted now.
  /// False if Redis could not be told.
  bool settle(const std::string& reservation, uint64_t used);

  /// Extends the given reservations by one TTL from now; returns those
  /// that had lapsed, or nothing if Redis did not answer.
  std::optional<std::vector<std::string>>
  renew(const std::vector<std::string>& reservations);

  /// Used tokens in the window and tokens reserved in flight, now; nothing
  /// if Redis did not answer.
  struct counts {
    uint64_t used = 0;
    uint64_t in_flight = 0;
  };
  std::optional<counts> read();

  uint64_t limit() const noexcept { return limit_; }

private:
  std::vector<std::string> keys() const;

  redis_client& redis_;
  std::string key_;
  uint64_t limit_;
  int64_t period_ms_;
  int64_t width_ms_;
  int64_t ttl_ms_;
  std::string node_;
  uint64_t next_ = 1;
};

} // namespace sluice
