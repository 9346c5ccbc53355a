#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::policy {

/// What one attempt at a source ended in (SPEC §4).
enum class outcome_kind : uint8_t {
  ok,
  /// 429: the source is loaded, not broken.
  rate_limited,
  /// 5xx, connection errors: worth retrying elsewhere.
  transient,
  /// No answer (or no first byte) in time.
  timeout,
  /// 4xx other than 429: the request itself is wrong.
  permanent,
};

/// The kind's name, e.g. "rate_limited" (metrics labels, error bodies).
/// Defined here, beside the enum, so that a new kind and its name change
/// together.
constexpr std::string_view to_string(outcome_kind x) noexcept {
  switch (x) {
  case outcome_kind::ok:
    return "ok";
  case outcome_kind::rate_limited:
    return "rate_limited";
  case outcome_kind::transient:
    return "transient";
  case outcome_kind::timeout:
    return "timeout";
  case outcome_kind::permanent:
    return "permanent";
  }
  return "unknown";
}

/// How an outcome counts toward a breaker's window.
enum class outcome_class : uint8_t {
  success,
  failure,
  /// Neither: not recorded at all.
  ignored,
};

/// The class's name as the config writes it: "success", "failure",
/// "ignored".
constexpr std::string_view to_string(outcome_class x) noexcept {
  switch (x) {
  case outcome_class::success:
    return "success";
  case outcome_class::failure:
    return "failure";
  case outcome_class::ignored:
    return "ignored";
  }
  return "unknown";
}

/// Parses a class name as printed by `to_string`; nullopt for any other.
constexpr std::optional<outcome_class>
parse_outcome_class(std::string_view name) noexcept {
  for (auto c :
       {outcome_class::success, outcome_class::failure, outcome_class::ignored})
    if (to_string(c) == name)
      return c;
  return std::nullopt;
}

/// Per-source mapping of outcomes to classes. The defaults are SPEC §2's:
/// transient errors and timeouts are failures; rate limiting is load
/// (handled by AIMD and backoff), and a permanent client error says the
/// source is healthy enough to judge the request.
struct outcome_classes {
  outcome_class rate_limited = outcome_class::ignored;
  outcome_class transient = outcome_class::failure;
  outcome_class timeout = outcome_class::failure;
  outcome_class permanent = outcome_class::success;

  /// `ok` is always a success.
  outcome_class of(outcome_kind k) const noexcept {
    switch (k) {
    case outcome_kind::ok:
      return outcome_class::success;
    case outcome_kind::rate_limited:
      return rate_limited;
    case outcome_kind::transient:
      return transient;
    case outcome_kind::timeout:
      return timeout;
    case outcome_kind::permanent:
      return permanent;
    }
    return outcome_class::ignored;
  }
};

} // namespace sluice::policy
