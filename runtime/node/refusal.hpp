#pragma once

// What the front's pure decisions (`choose_endpoint`,
// `parse_operator_action`) say when they refuse a request: the code its
// JSON error answer is built from (errors.hpp gives the HTTP status) and
// the message.

#include <optional>
#include <string>
#include <utility>

#include "sluice/messages/errors.hpp"

namespace sluice::node {

struct refusal {
  /// Set when refused, with the message in `why`.
  std::optional<errc> error;
  std::string why;
};

/// A `Decision` (derived from `refusal`) that refuses with `code`.
template <class Decision>
Decision refused(errc code, std::string why) {
  Decision out;
  out.error = code;
  out.why = std::move(why);
  return out;
}

} // namespace sluice::node
