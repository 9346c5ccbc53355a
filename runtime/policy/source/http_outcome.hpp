#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// The longest wait `parse_retry_after` returns: a year. Longer hints (huge
/// delta-seconds, dates in year 9999) saturate here rather than overflow
/// the nanosecond clock; a year is past every bound a hint is checked
/// against (`max_retry_after_limit`, `duration_limit`), so a saturated hint
/// still reads as "too long", never as "retry now".
constexpr duration retry_after_saturation = std::chrono::hours{24 * 365};

/// The outcome class of an HTTP answer (SPEC §4): 2xx ok; 429 rate limited;
/// 408 and 5xx transient (worth retrying elsewhere); any other status
/// permanent (the request itself is wrong, or the upstream answered with
/// something a gateway cannot pass on as a success).
outcome_kind classify_http_status(int status) noexcept;

/// The lowest and highest status a source may class its own way: any
/// non-2xx final status. A 2xx stays a success (a streamed one is passed
/// on as it arrives, so it could not be retried anyway); an empty one may
/// count as transient (`status_rules::empty_2xx_transient`).
constexpr int first_classed_status = 300;
constexpr int last_classed_status = 599;

/// How one source classes its upstream's statuses (Envoy's
/// `retriable_status_codes`, Portkey's `on_status_codes`): the defaults of
/// `classify_http_status`, with some statuses moved to another class. The
/// one place a status becomes an outcome.
struct status_rules {
  /// Status -> class, for statuses in [first_classed_status,
  /// last_classed_status]; the class is transient, rate_limited or
  /// permanent. At most one entry per status.
  std::vector<std::pair<int, outcome_kind>> overrides;
  /// A 2xx answer with no body at all is a transient failure (retried
  /// elsewhere), not a success: some providers answer an overloaded
  /// request with an empty 200 (TensorZero #3799).
  bool empty_2xx_transient = false;

  /// The class of a final answer of `status` whose body had `body_bytes`
  /// bytes (streamed or held).
  outcome_kind classify(int status, uint64_t body_bytes) const noexcept;

  /// Moves `status` to `kind`. Throws `field_error` naming `statuses` for a
  /// status outside the classed range, a kind that is not transient,
  /// rate_limited or permanent, or a status classed twice.
  void set(int status, outcome_kind kind);
};

/// The rules `status_rules::set` enforces, for rules built by hand (the
/// overrides are a public vector): throws `field_error` naming `statuses`.
void validate(const status_rules& rules);

/// Parses a Retry-After value: delta-seconds ("120") or an HTTP-date in any
/// of the three formats RFC 9110 allows (IMF-fixdate, RFC 850, asctime).
/// Returns how long to wait from `now`, in [0, retry_after_saturation]: a
/// date in the past is zero, anything longer than the saturation (however
/// many digits, whatever year) is the saturation. Nothing for a value that
/// is neither.
std::optional<duration>
parse_retry_after(std::string_view value,
                  std::chrono::system_clock::time_point now);

} // namespace sluice::policy
