#include "sluice/runtime/policy/http_outcome.hpp"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

namespace sluice::policy {

outcome_kind classify_http_status(int status) noexcept {
  if (status >= 200 && status < 300)
    return outcome_kind::ok;
  if (status == 429)
    return outcome_kind::rate_limited;
  if (status == 408 || (status >= 500 && status < 600))
    return outcome_kind::transient;
  return outcome_kind::permanent;
}

std::optional<duration>
parse_retry_after(std::string_view value,
                  std::chrono::system_clock::time_point now) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value[0])))
    value.remove_prefix(1);
  while (!value.empty() &&
         std::isspace(static_cast<unsigned char>(value.back())))
    value.remove_suffix(1);
  if (value.empty())
    return std::nullopt;
  // delta-seconds: digits only.
  bool digits = true;
  for (auto c : value)
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
  const auto limit_s =
      std::chrono::duration_cast<std::chrono::seconds>(retry_after_saturation)
          .count();
  if (digits) {
    // Accumulate with saturation: no digit count overflows.
    int64_t s = 0;
    for (auto c : value) {
      s = s * 10 + (c - '0');
      if (s > limit_s)
        return retry_after_saturation;
    }
    return std::chrono::duration_cast<duration>(std::chrono::seconds{s});
  }
  // HTTP-date, in the formats RFC 9110 §5.6.7 requires recipients to accept.
  std::string text{value};
  for (auto format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                      "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    auto end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0')
      continue;
    // Compare in whole seconds first: a time_point of year 9999 overflows
    // the nanosecond system clock (the wrapped value read as "retry now").
    int64_t at_s = timegm(&tm);
    auto now_s =
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch())
            .count();
    if (at_s < now_s - 1)
      return duration::zero();
    if (at_s - now_s > limit_s)
      return retry_after_saturation;
    auto at = std::chrono::system_clock::from_time_t(static_cast<time_t>(at_s));
    if (at <= now)
      return duration::zero();
    return std::chrono::duration_cast<duration>(at - now);
  }
  return std::nullopt;
}

} // namespace sluice::policy
