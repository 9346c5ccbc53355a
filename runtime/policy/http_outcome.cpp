#include "runtime/policy/http_outcome.hpp"

#include <cctype>
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
  if (digits) {
    if (value.size() > 9) // more than ~31 years: clamp
      return std::chrono::duration_cast<duration>(std::chrono::hours{24 * 365});
    return std::chrono::duration_cast<duration>(std::chrono::seconds{
        std::strtol(std::string{value}.c_str(), nullptr, 10)});
  }
  // HTTP-date, in the formats RFC 9110 §5.6.7 requires recipients to accept.
  std::string text{value};
  for (auto format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                      "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    auto end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0')
      continue;
    auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
    if (at <= now)
      return duration::zero();
    return std::chrono::duration_cast<duration>(at - now);
  }
  return std::nullopt;
}

} // namespace sluice::policy
