#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <caf/error.hpp>

#include "sluice/messages/errors.hpp"

namespace sluice {

/// The three admission tiers, in the only order a call may acquire them:
/// most local first, so no call holds a more global permit while it waits
/// for a more local one (this order is what makes admission deadlock-free).
enum class tier_kind : uint8_t {
  session,
  connection,
  global,
};

/// Number of tiers on an admission path.
constexpr size_t tier_count = 3;

/// Returns "session", "connection" or "global".
std::string_view to_string(tier_kind x) noexcept;

/// Parses a tier name as printed by `to_string`.
std::optional<tier_kind> parse_tier_kind(std::string_view name) noexcept;

/// Identifies one permit within its tier; never reused by that tier, which is
/// what makes releasing a permit twice harmless.
using permit_id = uint64_t;

/// The `tool_busy` (-32016) rejection for a call whose admission deadline
/// passed while it waited on `tier`. The context is the tier name.
caf::error tool_busy(tier_kind tier);

/// Returns the tier a `tool_busy` error names, if `err` is one.
std::optional<tier_kind> busy_tier(const caf::error& err);

/// Counts of one admission tier, as reported by its owner.
struct tier_status {
  tier_kind kind;
  uint32_t cap;
  uint32_t in_use;
  uint32_t waiting;
};

/// Counts of a source's own concurrency tier, as its gate reports them: not
/// an admission tier (no `tier_kind`); its cap is the AIMD limit.
struct gate_status {
  uint32_t cap;
  uint32_t in_use;
  uint32_t waiting;
};

} // namespace sluice
