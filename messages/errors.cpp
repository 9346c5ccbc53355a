#include "messages/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

namespace sluice {

error_info describe(errc x) noexcept {
  switch (x) {
  case errc::tool_busy:
    return {"tool_busy", -32016, 503};
  case errc::all_sources_exhausted:
    return {"all_sources_exhausted", -32017, 503};
  case errc::governance_backend_error:
    return {"governance_backend_error", -32018, 503};
  case errc::upstream_error:
    return {"upstream_error", -32019, 502};
  case errc::bad_request:
    return {"bad_request", -32600, 400};
  case errc::not_found:
    return {"not_found", -32601, 404};
  case errc::method_not_allowed:
    return {"method_not_allowed", -32020, 405};
  case errc::payload_too_large:
    return {"payload_too_large", -32021, 413};
  case errc::headers_too_large:
    return {"headers_too_large", -32022, 431};
  case errc::overloaded:
    return {"overloaded", -32023, 503};
  case errc::shutting_down:
    return {"shutting_down", -32024, 503};
  }
  return {"unknown", -32000, 500};
}

std::string to_string(errc x) {
  return std::string{describe(x).name};
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category, [](uint8_t code, caf::atom_value,
                                            const caf::message& ctx) {
    auto result = "sluice::" + to_string(static_cast<errc>(code));
    if (!ctx.empty())
      result += caf::deep_to_string(ctx);
    return result;
  });
}

} // namespace sluice
