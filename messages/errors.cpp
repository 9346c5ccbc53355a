#include "sluice/messages/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>

namespace sluice {

error_info describe(errc x) noexcept {
  constexpr std::string_view client = "invalid_request_error";
  constexpr std::string_view server = "server_error";
  switch (x) {
  case errc::tool_busy:
    return {"tool_busy", -32016, 503, server};
  case errc::all_sources_exhausted:
    return {"all_sources_exhausted", -32017, 503, server};
  case errc::governance_backend_error:
    return {"governance_backend_error", -32018, 503, server};
  case errc::upstream_error:
    return {"upstream_error", -32019, 502, server};
  case errc::bad_request:
    return {"bad_request", -32600, 400, client};
  case errc::not_found:
    return {"not_found", -32601, 404, client};
  case errc::method_not_allowed:
    return {"method_not_allowed", -32020, 405, client};
  case errc::payload_too_large:
    return {"payload_too_large", -32021, 413, client};
  case errc::headers_too_large:
    return {"headers_too_large", -32022, 431, client};
  case errc::overloaded:
    return {"overloaded", -32023, 503, server};
  case errc::shutting_down:
    return {"shutting_down", -32024, 503, server};
  case errc::model_not_found:
    return {"model_not_found", -32025, 404, client};
  case errc::unauthorized:
    return {"invalid_api_key", -32026, 401, client};
  case errc::rate_limited:
    return {"rate_limit_exceeded", -32027, 429, "requests"};
  case errc::forbidden:
    return {"permission_denied", -32028, 403, client};
  case errc::config_rejected:
    return {"config_rejected", -32029, 422, client};
  case errc::insufficient_quota:
    return {"insufficient_quota", -32030, 429, "insufficient_quota"};
  case errc::end_:
    break;
  }
  return {"unknown", -32000, 500, server};
}

std::vector<errc> all_errcs() {
  std::vector<errc> out;
  for (auto i = static_cast<uint8_t>(errc::tool_busy);
       i < static_cast<uint8_t>(errc::end_); ++i)
    out.push_back(static_cast<errc>(i));
  return out;
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
