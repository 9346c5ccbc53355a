#include "sluice/runtime/policy/mcp/request_envelope.hpp"

#include "sluice/runtime/policy/mcp/protocol_version.hpp"

namespace sluice::policy::mcp {

namespace {

envelope_verdict refuse(int code, std::string message) {
  envelope_verdict v;
  v.code = code;
  v.message = std::move(message);
  return v;
}

envelope_verdict missing_meta(std::string_view key) {
  auto v = refuse(-32602, "_meta lacks " + std::string{key} +
                              " (MCP 2026-07-28: every request carries it)");
  v.missing = std::string{key};
  return v;
}

envelope_verdict mismatch(std::string_view header, std::string message) {
  auto v = refuse(header_mismatch, std::move(message));
  v.header = std::string{header};
  return v;
}

} // namespace

const char* name_field_of(std::string_view method) noexcept {
  if (method == "tools/call" || method == "prompts/get")
    return "name";
  if (method == "resources/read")
    return "uri";
  return nullptr;
}

bool is_stateless_request(const request_envelope& e) noexcept {
  // A session header does not make a request of the new era one of the
  // old: 2026-07-28 ignores it, and the old path checks less.
  if (e.method == "initialize")
    return false;
  return e.method == "server/discover" || e.meta_version ||
         e.meta_version_bad ||
         (e.version_header && is_stateless(*e.version_header));
}

envelope_verdict check_routing_headers(const request_envelope& e,
                                       bool required) {
  if (e.repeated_header)
    return mismatch(*e.repeated_header, std::string{*e.repeated_header} +
                                            " appears more than once");
  if (!e.request)
    return {};
  if ((required || e.method_header) && e.method_header != e.method)
    return mismatch("Mcp-Method",
                    "Mcp-Method " +
                        (e.method_header ? quoted_header(*e.method_header)
                                         : std::string{"(none)"}) +
                        " differs from the method " + quoted_header(e.method));
  // (No name in the body at all: the method's own check answers that.)
  auto field = name_field_of(e.method);
  bool named = e.name_header || e.name_header_bad;
  if (field && e.acted_on && (required || named) && e.name_header != e.acted_on)
    return mismatch("Mcp-Name",
                    std::string{"Mcp-Name "} +
                        (e.name_header       ? quoted_header(*e.name_header)
                         : e.name_header_bad ? std::string{"(badly encoded)"}
                                             : std::string{"(none)"}) +
                        " differs from params." + field);
  return {};
}

envelope_verdict check_envelope(const request_envelope& e) {
  if (e.meta_version_bad)
    return refuse(-32602, std::string{meta_protocol_version} +
                              " in _meta must be a string");
  if (!e.meta_version)
    return missing_meta(meta_protocol_version);
  if (!is_stateless(*e.meta_version)) {
    auto v = refuse(unsupported_protocol_version,
                    "unsupported protocol version " +
                        quoted_header(*e.meta_version) +
                        " without a session (sessionless: " +
                        std::string{stateless_versions().front()} +
                        "; older revisions begin with initialize)");
    v.supported = stateless_versions();
    v.requested = quoted_header(*e.meta_version);
    v.requested = v.requested.substr(1, v.requested.size() - 2);
    return v;
  }
  if (e.request && !e.meta_capabilities)
    return missing_meta(meta_client_capabilities);
  if (e.version_header != e.meta_version)
    return mismatch("MCP-Protocol-Version",
                    "MCP-Protocol-Version " +
                        (e.version_header ? quoted_header(*e.version_header)
                                          : std::string{"(none)"}) +
                        " differs from _meta's " +
                        quoted_header(*e.meta_version));
  if (auto v = check_routing_headers(e, true); !v.ok())
    return v;
  envelope_verdict ok;
  ok.version = std::string{*e.meta_version};
  return ok;
}

} // namespace sluice::policy::mcp
