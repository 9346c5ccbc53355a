#include "sluice/runtime/policy/source/http_outcome.hpp"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

#include "sluice/runtime/policy/field_error.hpp"

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

outcome_kind status_rules::classify(int status,
                                    uint64_t body_bytes) const noexcept {
  for (auto& [s, kind] : overrides)
    if (s == status)
      return kind;
  auto kind = classify_http_status(status);
  if (kind == outcome_kind::ok && body_bytes == 0 && empty_2xx_transient)
    return outcome_kind::transient;
  return kind;
}

void validate(const status_rules& rules) {
  status_rules check;
  for (auto& [status, kind] : rules.overrides)
    check.set(status, kind);
}

void status_rules::set(int status, outcome_kind kind) {
  if (status < first_classed_status || status > last_classed_status)
    throw field_error("statuses", "status " + std::to_string(status) +
                                      " is not in [300, 599] (a 2xx is "
                                      "a success; see empty_2xx_transient)");
  if (kind != outcome_kind::transient && kind != outcome_kind::rate_limited &&
      kind != outcome_kind::permanent)
    throw field_error("statuses", "a status is classed transient, "
                                  "rate_limited or permanent");
  for (auto& o : overrides)
    if (o.first == status)
      throw field_error("statuses", "status " + std::to_string(status) +
                                        " is classed twice");
  overrides.emplace_back(status, kind);
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
