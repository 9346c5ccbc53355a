// The settings of one upstream MCP server, checked (`validate`): what a
// config may say before the server's source starts.

#include "sluice/actors/mcp/mcp_source.hpp"

#include <string>

#include <boost/beast/core/string.hpp>

#include "sluice/actors/http_source.hpp"
#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

namespace {

// A header the config gives a tool server: what a caller may send
// (`upstream::forwardable`: a token name, no control byte in the value) or
// a credential, which only the config may set; never one the channel owns
// (the MCP session, the revision, what it accepts).
bool config_header(const std::string& name, const std::string& value) {
  for (auto own : {"mcp-session-id", "mcp-protocol-version", "accept"})
    if (boost::beast::iequals(name, own))
      return false;
  for (auto credential : {"authorization", "proxy-authorization", "api-key",
                          "x-api-key", "cookie"})
    if (boost::beast::iequals(name, credential))
      return upstream::forwardable("x", value);
  return upstream::forwardable(name, value);
}

} // namespace

void validate(const mcp_server_settings& cfg) {
  if (cfg.transport == mcp_transport::stdio && cfg.command.empty())
    throw field_error("command", "a stdio server needs a command");
  if (cfg.transport == mcp_transport::http) {
    std::string why;
    auto url = upstream::parse_url(cfg.url, why);
    if (!url)
      throw field_error("url", why);
    if (cfg.tls && !url->https)
      throw field_error("tls", "set for an http:// url: use https://");
    if (cfg.tls) {
      try {
        validate(*cfg.tls);
      } catch (const field_error& e) {
        throw field_error(std::string{"tls."} + e.field(), e.what());
      }
    }
    for (auto& [name, value] : cfg.headers)
      if (!config_header(name, value))
        throw field_error("headers", "'" + name +
                                         "' is no header the gateway may "
                                         "send, or its value holds a line "
                                         "break or control byte");
    if (cfg.connect_timeout <= duration::zero())
      throw field_error("connect_timeout_s", "must be positive");
  }
  auto positive = [](duration d, const char* field) {
    if (d <= duration::zero())
      throw field_error(field, "must be positive");
  };
  positive(cfg.init_timeout, "init_timeout_s");
  positive(cfg.idle_timeout, "idle_timeout_s");
  positive(cfg.call_timeout, "call_timeout_s");
  positive(cfg.restart_backoff, "restart_backoff_s");
  positive(cfg.stop_grace, "stop_grace_s");
  if (cfg.restart_backoff_max < cfg.restart_backoff)
    throw field_error("restart_backoff_max_s",
                      "must be at least restart_backoff_s");
  if (cfg.max_message_bytes < 1024 ||
      cfg.max_message_bytes > mcp::max_message_bytes)
    throw field_error("max_message_bytes",
                      "must be between 1024 and " +
                          std::to_string(mcp::max_message_bytes));
}

} // namespace sluice
