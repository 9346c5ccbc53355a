#include "sluice/runtime/policy/mcp/retry_safety.hpp"

namespace sluice::policy::mcp {

tool_hints hints_of(std::optional<bool> read_only,
                    std::optional<bool> idempotent,
                    std::optional<bool> destructive) noexcept {
  tool_hints defaults;
  return {read_only.value_or(defaults.read_only),
          idempotent.value_or(defaults.idempotent),
          destructive.value_or(defaults.destructive)};
}

bool may_retry(delivery how_far, const tool_hints& hints) noexcept {
  switch (how_far) {
  case delivery::not_sent:
    return true;
  case delivery::sent:
  case delivery::unknown:
    return hints.read_only || hints.idempotent;
  }
  return false;
}

} // namespace sluice::policy::mcp
