#pragma once

// What the front's pure decisions (`choose_endpoint`,
// `parse_operator_action`, `plan_call`) say when they refuse a request:
// the code its JSON error answer is built from (errors.hpp gives the HTTP
// status), the message, the field at fault and when to come back. The
// connection answers every refusal through one path (`connection::refuse`).

#include <optional>
#include <string>
#include <utility>

#include "sluice/messages/errors.hpp"

namespace sluice::node {

struct refusal {
  /// Set when refused, with the message in `why`.
  std::optional<errc> error;
  std::string why;
  /// The request field at fault (OpenAI's `param`; null: none).
  const char* param = nullptr;
  /// When to come back (`Retry-After` and the body's `retry_after_s`;
  /// none: a 503's one second, else no header).
  std::optional<double> retry_after_s;
  /// The error's `type`, where it is not the code's own (OpenAI's "tokens"
  /// for a token limit; null: the code's).
  const char* type = nullptr;
};

/// A `Decision` (derived from `refusal`) that refuses with `code`.
template <class Decision = refusal>
Decision refused(errc code, std::string why) {
  Decision out;
  out.error = code;
  out.why = std::move(why);
  return out;
}

/// The same, naming the request field at fault (OpenAI's `param`).
template <class Decision = refusal>
Decision refused(errc code, std::string why, const char* param) {
  auto out = refused<Decision>(code, std::move(why));
  out.param = param;
  return out;
}

} // namespace sluice::node
