#pragma once

// What an operator's `POST /admin/breakers/SOURCE/ACTION` asks for, read
// from its path. Pure: whether SOURCE exists is for the caller to find.

#include <optional>
#include <string>
#include <string_view>

#include "sluice/actors/operator_queries.hpp"
#include "sluice/runtime/node/refusal.hpp"

namespace sluice::node {

/// A parsed operator action, or why the path names none (404 for an unknown
/// path or action, 400 for a malformed source).
struct operator_action : refusal {
  /// The decoded source name.
  std::string source;
  /// "reset" or "isolate", as the path spells it (echoed in the answer).
  std::string action_name;
  breaker_action action = breaker_action::reset;
};

/// Reads `rest`, the path after "/admin/".
operator_action parse_operator_action(std::string_view rest);

} // namespace sluice::node
