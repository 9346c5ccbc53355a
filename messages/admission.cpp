#include "sluice/messages/admission.hpp"

#include <caf/message.hpp>

namespace sluice {

std::string_view to_string(tier_kind x) noexcept {
  switch (x) {
  case tier_kind::session:
    return "session";
  case tier_kind::connection:
    return "connection";
  case tier_kind::global:
    return "global";
  }
  return "unknown";
}

std::optional<tier_kind> parse_tier_kind(std::string_view name) noexcept {
  for (auto k : {tier_kind::session, tier_kind::connection, tier_kind::global})
    if (to_string(k) == name)
      return k;
  return std::nullopt;
}

caf::error tool_busy(tier_kind tier) {
  return make_error(errc::tool_busy, std::string{to_string(tier)});
}

std::optional<tier_kind> busy_tier(const caf::error& err) {
  if (!is(err, errc::tool_busy))
    return std::nullopt;
  const auto& ctx = err.context();
  if (ctx.size() != 1 || !ctx.match_element<std::string>(0))
    return std::nullopt;
  return parse_tier_kind(ctx.get_as<std::string>(0));
}

} // namespace sluice
