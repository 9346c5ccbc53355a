// /mcp in MCP revision 2026-07-28 (SPEC §13): no initialize and no session.
// Each request names its revision and the client's capabilities in
// `_meta`, and its method and target in headers; `server/discover` says
// what the gateway serves; every result says its `resultType`. A call is
// cancelled by closing its stream. The session revisions are served on the
// same endpoint (connection_mcp.cpp), told apart by
// policy::mcp::is_stateless_request.

#include "sluice/runtime/node/connection.hpp"

#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/runtime/node/mcp_request.hpp"
#include "sluice/runtime/node/request_access.hpp"
#include "sluice/runtime/policy/mcp/protocol_version.hpp"
#include "sluice/runtime/policy/mcp/request_envelope.hpp"

namespace sluice::node {

namespace pmcp = policy::mcp;
using nlohmann::json;

namespace {

/// MCP's encoding of a header value that is no plain ASCII token.
constexpr std::string_view base64_open = "=?base64?";
constexpr std::string_view base64_close = "?=";

/// The prefix of the `_meta` keys MCP reserves for itself.
constexpr std::string_view reserved_meta = "io.modelcontextprotocol/";

std::optional<std::string_view> header_of(const http_fields& h,
                                          std::string_view name) {
  auto i = h.find(boost::beast::string_view{name.data(), name.size()});
  if (i == h.end())
    return std::nullopt;
  auto v = i->value();
  return std::string_view{v.data(), v.size()};
}

json discover_result() {
  auto init = initialize_result("");
  json versions = json::array();
  for (auto v : pmcp::stateless_versions())
    versions.push_back(v);
  json r{
      {"supportedVersions", std::move(versions)},
      {"capabilities", init["capabilities"]},
      {"serverInfo", init["serverInfo"]},
      {"instructions", init["instructions"]},
      {"_meta", {{"io.modelcontextprotocol/serverInfo", init["serverInfo"]}}}};
  stateless_result("server/discover", r);
  return r;
}

} // namespace

pmcp::request_envelope read_envelope(const http_fields& h,
                                     const mcp::message& m,
                                     std::string& name_store) {
  pmcp::request_envelope e;
  e.session_header = h.find("Mcp-Session-Id") != h.end();
  for (std::string_view name :
       {"Mcp-Session-Id", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"})
    if (h.count(boost::beast::string_view{name.data(), name.size()}) > 1)
      e.repeated_header = name;
  e.version_header = header_of(h, "MCP-Protocol-Version");
  e.method_header = header_of(h, "Mcp-Method");
  if (auto name = header_of(h, "Mcp-Name")) {
    auto n = *name;
    if (n.size() >= base64_open.size() + base64_close.size() &&
        n.substr(0, base64_open.size()) == base64_open &&
        n.substr(n.size() - base64_close.size()) == base64_close) {
      n.remove_prefix(base64_open.size());
      n.remove_suffix(base64_close.size());
      if (auto decoded = decode_base64(n)) {
        name_store = std::move(*decoded);
        e.name_header = name_store;
      } else {
        e.name_header_bad = true;
      }
    } else {
      e.name_header = n;
    }
  }
  e.request = m.what == mcp::message::kind::request;
  e.method = m.method;
  if (!m.params.is_object())
    return e;
  if (auto meta = m.params.find("_meta");
      meta != m.params.end() && meta->is_object()) {
    if (auto v = meta->find(pmcp::meta_protocol_version); v != meta->end()) {
      if (v->is_string())
        e.meta_version = v->get_ref<const std::string&>();
      else
        e.meta_version_bad = true;
    }
    auto caps = meta->find(pmcp::meta_client_capabilities);
    e.meta_capabilities = caps != meta->end() && caps->is_object();
  }
  if (auto field = pmcp::name_field_of(m.method))
    if (auto v = m.params.find(field); v != m.params.end() && v->is_string())
      e.acted_on = v->get_ref<const std::string&>();
  return e;
}

void stateless_result(std::string_view method, json& result) {
  result["resultType"] = "complete";
  if (method == "server/discover" || method == "resources/read" ||
      (method.size() > 5 && method.substr(method.size() - 5) == "/list")) {
    result["ttlMs"] = 0;
    result["cacheScope"] = "private"; // filtered by the client's key
  }
}

void connection::serve_mcp_stateless(mcp::message& m,
                                     const pmcp::request_envelope& e) {
  auto id = m.id.empty() ? std::string{"null"} : m.id;
  auto v = pmcp::check_envelope(e);
  if (!v.ok()) {
    json data = json::object();
    if (!v.supported.empty())
      data = {{"supported", v.supported}, {"requested", v.requested}};
    else if (!v.missing.empty())
      data = {{"envelope", {{"missing", json::array({v.missing})}}}};
    else if (!v.header.empty())
      data = {{"header", v.header}};
    rec_.rpc_error = v.code;
    return mcp_reply(400, mcp::error_response(id, v.code, v.message, &data));
  }
  using kind = mcp::message::kind;
  if (m.what != kind::request) // no client notification means anything here
    return mcp_reply(202, "");
  if (m.method == "server/discover")
    return mcp_reply(200, mcp::result_response(id, discover_result()));
  if (auto list = mcp_list(m.method)) {
    stateless_result(m.method, *list);
    return mcp_reply(200, mcp::result_response(id, *list));
  }
  // The client's envelope is for the gateway: each server has its own
  // session and revision, and is told nothing of this one.
  if (m.params.is_object()) {
    if (auto meta = m.params.find("_meta");
        meta != m.params.end() && meta->is_object()) {
      for (auto i = meta->begin(); i != meta->end();) {
        if (i.key().compare(0, reserved_meta.size(), reserved_meta) == 0)
          i = meta->erase(i);
        else
          ++i;
      }
    }
  }
  if (mcp_forward(m, "", true))
    return;
  rec_.rpc_error = mcp::method_not_found;
  mcp_reply(404,
            mcp::error_response(id, mcp::method_not_found, mcp_unknown_method));
}

} // namespace sluice::node
