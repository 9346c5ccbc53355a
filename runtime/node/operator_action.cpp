#include "sluice/runtime/node/operator_action.hpp"

#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/node/request_reading.hpp"

namespace sluice::node {

namespace {

operator_action refuse(errc code, std::string why) {
  return node::refused<operator_action>(code, std::move(why));
}

} // namespace

operator_action parse_operator_action(std::string_view rest) {
  constexpr std::string_view prefix = "breakers/";
  auto slash = rest.rfind('/');
  if (rest.rfind(prefix, 0) != 0 || slash == std::string_view::npos ||
      slash < prefix.size())
    return refuse(errc::not_found,
                   "no admin action " + echo_text(rest) +
                       " (use /admin/breakers/SOURCE/reset or /isolate)");
  std::string action_name{rest.substr(slash + 1)};
  auto source =
      percent_decode(rest.substr(prefix.size(), slash - prefix.size()));
  if (!source || source->empty())
    return refuse(errc::bad_request, "malformed source name");
  operator_action out;
  if (action_name == "reset")
    out.action = breaker_action::reset;
  else if (action_name == "isolate")
    out.action = breaker_action::isolate;
  else
    return refuse(errc::not_found, "no breaker action " +
                                        echo_text(action_name) +
                                        " (reset or isolate)");
  out.source = std::move(*source);
  out.action_name = std::move(action_name);
  return out;
}

} // namespace sluice::node
