#pragma once

#include <chrono>
#include <optional>
#include <string_view>

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
