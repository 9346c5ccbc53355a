#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/redis/client.hpp"

namespace sluice {

/// One limit a call reserves in, shared by every node on one Redis key
/// prefix (SPEC §12): tokens over a sliding period (`policy::token_window`'s
/// rule: a token counts for at least the whole period) or money over a UTC
/// day or month (`policy::spend_budget`'s).
struct shared_limit {
  enum class kind : uint8_t { window, day, month };
  /// Names it in Redis, e.g. "key:alice:tokens_per_minute".
  std::string name;
  kind type = kind::window;
  /// Tokens; or money (1e-8 dollars) for a budget.
  uint64_t limit = 0;
  /// A window's period (a budget's is its calendar's).
  duration period = std::chrono::minutes{1};
  /// Reserving: the call's estimate. Settling: what it used.
  uint64_t amount = 0;
};

/// Limits kept in Redis, so that no node reads a stale count (a limit holds
/// across nodes, not limit x nodes). A call reserves in all its limits at
/// once, or in none, and settles all of them at once: each step is one Lua
/// script on the server's clock.
///
/// Keys, under `<prefix>spend:<name>`: `:used` (a hash: for a window,
/// bucket index -> tokens, buckets of period / 60; for a budget, period
/// index -> money, the day or month since 1970 on the server's clock),
/// `:held` (a sorted set, reservation -> its lapse) and `:amounts` (a hash,
/// reservation -> amount, and `#` their sum). A reservation lapses
/// `reservation_ttl` after it was made or last renewed: a node killed with
/// -9 leaks none beyond that. Every key expires when unused (a window's
/// after a period and a TTL, a budget's after its period).
///
/// Amounts go to Redis as the strings they were given and are compared as
/// Lua numbers: exact up to 2^53 (tokens up to `max_amount`, budgets up to
/// 90 million dollars; over that, to the 1e-7 dollar).
///
/// Blocking (hiredis): use it from one thread, its connection's.
class shared_limits {
public:
  /// The most one limit or amount may be (a larger amount is counted as
  /// this): Redis's counters are 64-bit, and this leaves sums room.
  static constexpr uint64_t max_amount = 1'000'000'000'000'000'000ULL;

  /// The shortest window: a bucket must be at least a millisecond.
  static constexpr duration min_period = std::chrono::milliseconds{60};

  /// `node` names this node in reservation ids (unique per process).
  /// Throws `field_error` for a TTL under 100 ms (`reservation_ttl`).
  shared_limits(redis_client& redis, duration reservation_ttl,
                std::string node);

  struct outcome {
    /// Redis answered (else `error`, and nothing else holds).
    bool answered = false;
    std::string error;
    bool ok = false;
    /// Refused: which limit (its index), and whether the amount is more
    /// than its whole limit.
    size_t refused = 0;
    bool too_large = false;
    /// Refused by a window: when enough tokens will have left it (zero:
    /// only reservations in flight stand in the way).
    duration retry_after = duration::zero();
    /// Per limit: what is left after this reservation (when granted) or
    /// now (when refused), and for a window how long until all its used
    /// tokens have left it.
    std::vector<uint64_t> remaining;
    std::vector<duration> reset_after;
    /// Granted: its id, to settle or renew it by.
    std::string reservation;
  };

  /// Reserves each limit's `amount`. Throws `field_error` (`limits`) for a
  /// limit of 0 or over `max_amount`, or a window under `min_period`.
  outcome reserve(const std::vector<shared_limit>& limits);

  /// The call of `reservation` ended having used each limit's `amount`: the
  /// reservation is freed (if it has not lapsed) and the amounts counted
  /// now. False if Redis could not be told.
  bool settle(const std::string& reservation,
              const std::vector<shared_limit>& used);

  /// A reservation and the names of the limits it holds.
  struct held_reservation {
    std::string id;
    std::vector<std::string> names;
  };

  /// Extends `reservations`, each in its own limits, by one TTL from now;
  /// returns those that had lapsed in all of theirs, or nothing if Redis
  /// did not answer.
  std::optional<std::vector<std::string>>
  renew(const std::vector<held_reservation>& reservations);

  /// Used amount and amount reserved in flight in `limit`, now; nothing if
  /// Redis did not answer.
  struct counts {
    uint64_t used = 0;
    uint64_t in_flight = 0;
  };
  std::optional<counts> read(const shared_limit& limit);

  /// The same for several limits, in one script.
  std::optional<std::vector<counts>>
  read_many(const std::vector<shared_limit>& limits);

  duration reservation_ttl() const noexcept { return ttl_; }

private:
  std::vector<std::string> keys(const std::vector<shared_limit>& limits) const;
  std::vector<std::string> shape(const shared_limit& l) const;

  redis_client& redis_;
  duration ttl_;
  std::string node_;
  uint64_t next_ = 1;
};

} // namespace sluice
