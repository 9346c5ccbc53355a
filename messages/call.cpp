#include "sluice/messages/call.hpp"

namespace sluice {

std::string_view to_string(call_status x) noexcept {
  switch (x) {
  case call_status::ok:
    return "ok";
  case call_status::tool_busy:
    return "tool_busy";
  case call_status::all_sources_exhausted:
    return "all_sources_exhausted";
  case call_status::upstream_error:
    return "upstream_error";
  case call_status::governance_backend_error:
    return "governance_backend_error";
  case call_status::cancelled:
    return "cancelled";
  }
  return "unknown";
}

} // namespace sluice
