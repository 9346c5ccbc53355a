// /mcp: the node as an MCP server in front of MCP servers (SPEC §13), over
// MCP's Streamable HTTP: one JSON-RPC message per POST, answered with JSON,
// or -- a tool call whose client asked for progress and takes an event
// stream -- with an SSE stream of its progress and then its answer.
// Members of `connection`: a tool call is a governed call like any other.

#include "sluice/runtime/node/connection.hpp"

#include <boost/beast/http/field.hpp>

#include "sluice/actors/mcp/jsonrpc.hpp"
#include "sluice/runtime/node/mcp_request.hpp"
#include "sluice/runtime/policy/mcp/protocol_version.hpp"

namespace sluice::node {

namespace http = boost::beast::http;
namespace pmcp = policy::mcp;
using nlohmann::json;

bool may_read_prefix(const client_key* key, const std::string& prefix) {
  // A key limited to some tools reads the resources of a server only when
  // its globs allow the server's every name (`PREFIX*`).
  return key == nullptr || key->may_call_tool(prefix + "*");
}

json initialize_result(const std::string& version) {
  json caps{{"tools", {{"listChanged", false}}},
            {"prompts", {{"listChanged", false}}},
            {"resources", {{"subscribe", false}, {"listChanged", false}}}};
  return json{{"protocolVersion", version},
              {"capabilities", std::move(caps)},
              {"serverInfo", {{"name", "sluice"}, {"version", "0.1.0"}}},
              {"instructions",
               "Tools of several MCP servers, each under its server's "
               "prefix, governed by sluice (admission, breakers, retries "
               "only where safe)."}};
}

namespace {

/// MCP's "Resource not found".
constexpr int mcp_resource_not_found = -32002;

} // namespace

std::string header_text(const http_fields& h, std::string_view name) {
  auto v = h[boost::beast::string_view{name.data(), name.size()}];
  return std::string(v.data(), v.size());
}

bool accepts(const http_fields& h, std::string_view type) {
  auto v = h[http::field::accept];
  std::string_view a{v.data(), v.size()};
  return a.find(type) != std::string_view::npos ||
         a.find("*/*") != std::string_view::npos;
}

void connection::mcp_reply(unsigned status, std::string body,
                           const std::string& session) {
  auto res = make_response(status, std::move(body), keep_, version_);
  if (!session.empty())
    res.set("Mcp-Session-Id", session);
  write(std::move(res));
}

void connection::serve_mcp() {
  auto& gw = front_.mcp;
  if (!gw.enabled())
    return refuse(errc::not_found, "no MCP servers are configured ([mcp])",
                  keep_);
  auto& head = request_.base();
  auto key = key_ ? key_->name() : std::string{};
  auto session_id = header_text(head, "Mcp-Session-Id");
  auto now = front_.now();
  auto method = request_.method();
  if (method == http::verb::delete_) {
    if (session_id.empty())
      return mcp_reply(400, mcp::error_response("null", mcp::invalid_request,
                                                "Mcp-Session-Id missing"));
    if (!gw.close_session(session_id, key))
      return mcp_reply(404, mcp::error_response("null", mcp::invalid_request,
                                                "no such session"));
    return mcp_reply(200, "");
  }
  if (method != http::verb::post) {
    // No stream of the server's own messages (GET): MCP allows a 405.
    auto res = make_response(405,
                             mcp::error_response("null", mcp::invalid_request,
                                                 "use POST (or DELETE to end "
                                                 "a session)"),
                             keep_, version_);
    res.set(http::field::allow, "POST, DELETE");
    return write(std::move(res));
  }
  if (!accepts(head, "application/json") && !accepts(head, "text/event-stream"))
    return mcp_reply(406,
                     mcp::error_response("null", mcp::invalid_request,
                                         "Accept must allow application/json"));
  auto read = mcp::read_message(request_.body());
  if (auto* err = std::get_if<mcp::read_error>(&read))
    return mcp_reply(400,
                     mcp::error_response(err->id, err->code, err->message));
  auto& m = std::get<mcp::message>(read);
  rec_.rpc_id = m.id;
  using kind = mcp::message::kind;
  // 2026-07-28 and later: no session; each request says its revision.
  std::string name_store;
  auto envelope = read_envelope(head, m, name_store);
  if (pmcp::is_stateless_request(envelope))
    return serve_mcp_stateless(m, envelope);
  // The session revisions define no routing headers; those that came must
  // still say what the body says (a proxy may route by them).
  if (auto v = pmcp::check_routing_headers(envelope, false); !v.ok())
    return mcp_reply(400, mcp::error_response(m.id.empty() ? "null" : m.id,
                                              v.code, v.message));
  // initialize opens a session; everything else names one, if it has one.
  if (m.what == kind::request && m.method == "initialize") {
    std::string asked;
    if (m.params.is_object())
      asked = m.params.value("protocolVersion", std::string{});
    auto version = pmcp::negotiate(asked);
    std::string id;
    if (pmcp::has_sessions(version))
      id = gw.open_session(key, version, now);
    return mcp_reply(
        200, mcp::result_response(m.id, initialize_result(version)), id);
  }
  std::optional<std::string_view> proto;
  auto proto_text = header_text(head, "MCP-Protocol-Version");
  if (head.find("MCP-Protocol-Version") != head.end())
    proto = proto_text;
  std::optional<mcp_session> session;
  if (session_id.empty() && envelope.session_header)
    return mcp_reply(400, mcp::error_response(m.id.empty() ? "null" : m.id,
                                              mcp::invalid_request,
                                              "Mcp-Session-Id is empty"));
  if (!session_id.empty()) {
    session = gw.use_session(session_id, key, now);
    if (!session) // MCP: the client starts a new session
      return mcp_reply(404, mcp::error_response(m.id.empty() ? "null" : m.id,
                                                mcp::invalid_request,
                                                "no such session"));
  }
  std::optional<std::string_view> negotiated;
  if (session)
    negotiated = session->version;
  auto verdict = pmcp::header_check(proto, negotiated);
  if (!verdict.ok())
    return mcp_reply(400,
                     mcp::error_response(m.id.empty() ? "null" : m.id,
                                         mcp::invalid_request, verdict.error));
  // Calls without a session are the key's (or the anonymous clients').
  auto scope = session ? session->id : "key:" + key;
  if (m.what != kind::request) {
    // A notification or a response: accepted, nothing to answer.
    if (m.what == kind::notification && m.method == "notifications/cancelled" &&
        m.params.is_object()) {
      auto rid = m.params.find("requestId");
      if (rid != m.params.end() &&
          (rid->is_string() || rid->is_number_integer()))
        gw.cancel(scope, rid->dump());
    }
    return mcp_reply(202, "");
  }
  if (m.method == "ping")
    return mcp_reply(200, mcp::result_response(m.id, json::object()));
  if (auto list = mcp_list(m.method))
    return mcp_reply(200, mcp::result_response(m.id, *list));
  if (mcp_forward(m, session ? session->id : std::string{}, false))
    return;
  rec_.rpc_error = mcp::method_not_found;
  mcp_reply(200, mcp::error_response(m.id, mcp::method_not_found,
                                     mcp_unknown_method));
}

std::optional<json> connection::mcp_list(const std::string& method) {
  auto& gw = front_.mcp;
  auto* k = key_;
  auto allowed = [k](const std::string& name) {
    return k == nullptr || k->may_call_tool(name);
  };
  if (method == "tools/list")
    return gw.list_tools(allowed);
  if (method == "prompts/list")
    return gw.list_prompts(allowed);
  if (method == "resources/list" || method == "resources/templates/list")
    return gw.list_resources(
        method != "resources/list",
        [k](const std::string& prefix) { return may_read_prefix(k, prefix); });
  return std::nullopt;
}

bool connection::mcp_forward(mcp::message& m, const std::string& session,
                             bool stateless) {
  bool call = m.method == "tools/call";
  if (!call && m.method != "prompts/get" && m.method != "resources/read")
    return false;
  if (!m.params.is_object()) {
    mcp_reply(200, mcp::error_response(m.id, mcp::invalid_params,
                                       m.method + " needs params"));
    return true;
  }
  auto sse = accepts(request_.base(), "text/event-stream");
  mcp_stateless_ = stateless;
  if (call)
    start_tool_call(m.id, std::move(m.params), session, sse);
  else
    start_read(m.id, m.method, std::move(m.params), session, sse);
  return true;
}

bool connection::may_read_server(const std::string& server) const {
  return may_read_prefix(key_, front_.mcp.prefix_of(server));
}

void connection::start_read(const std::string& id, const std::string& method,
                            json params, const std::string& session,
                            bool sse_ok) {
  auto& gw = front_.mcp;
  std::optional<std::string> server;
  if (method == "prompts/get") {
    auto n = params.find("name");
    if (n == params.end() || !n->is_string())
      return mcp_reply(200, mcp::error_response(id, mcp::invalid_params,
                                                "prompts/get needs a name"));
    auto name = n->get<std::string>();
    rec_.tool = echo_text(name);
    auto p = gw.resolve_prompt(name);
    if (!p || (key_ && !key_->may_call_tool(name))) {
      rec_.rpc_error = mcp::invalid_params;
      return mcp_reply(
          200, mcp::error_response(id, mcp::invalid_params,
                                   "unknown prompt: " + echo_text(name)));
    }
    params["name"] = p->name; // the server's own name
    server = p->server;
  } else {
    auto u = params.find("uri");
    if (u == params.end() || !u->is_string())
      return mcp_reply(200, mcp::error_response(id, mcp::invalid_params,
                                                "resources/read needs a uri"));
    auto uri = u->get<std::string>();
    rec_.tool = echo_text(uri);
    server = gw.resource_server(uri);
    if (!server || !may_read_server(*server)) {
      // 2026-07-28 retired -32002 for -32602.
      auto code = mcp_stateless_ ? mcp::invalid_params : mcp_resource_not_found;
      rec_.rpc_error = code;
      json data{{"uri", echo_text(uri)}};
      return mcp_reply(
          200, mcp::error_response(id, code, "Resource not found", &data));
    }
  }
  send_upstream(id, method, std::move(params), *server, session, sse_ok);
}

void connection::start_tool_call(const std::string& id, json params,
                                 const std::string& session, bool sse_ok) {
  auto& gw = front_.mcp;
  auto name_it = params.find("name");
  if (name_it == params.end() || !name_it->is_string())
    return mcp_reply(200, mcp::error_response(id, mcp::invalid_params,
                                              "tools/call needs a name"));
  auto name = name_it->get<std::string>();
  rec_.tool = echo_text(name);
  auto tool = gw.resolve(name);
  if (!tool || (key_ && !key_->may_call_tool(name))) {
    rec_.rpc_error = mcp::invalid_params;
    return mcp_reply(200,
                     mcp::error_response(id, mcp::invalid_params,
                                         "unknown tool: " + echo_text(name)));
  }
  params["name"] = tool->name; // the server's own name
  send_upstream(id, "tools/call", std::move(params), tool->server, session,
                sse_ok);
}

void connection::send_upstream(const std::string& id, const std::string& method,
                               json params, const std::string& server,
                               const std::string& session, bool sse_ok) {
  auto& gw = front_.mcp;
  rec_.mcp_server = server;
  call_options opts;
  if (key_) {
    if (!session.empty()) {
      opts.session = session;
      opts.session_group = key_->tier(); // capped each and together
    } else {
      opts.session_tier = key_->tier(); // the key is the session
    }
    if (auto wait = key_->take(front_.now())) {
      json data{
          {"retry_after_s", std::chrono::duration<double>(*wait).count()}};
      rec_.rpc_error = -32000;
      return mcp_reply(
          200, mcp::error_response(id, -32000, "rate_limit_exceeded", &data));
    }
  } else {
    opts.session = session;
  }
  bool progress = false;
  if (auto meta = params.find("_meta");
      meta != params.end() && meta->is_object())
    progress = meta->contains("progressToken");
  json payload{{"method", method}, {"params", std::move(params)}};
  call_request call{
      "mcp:" + server,
      payload.dump(-1, ' ', false, json::error_handler_t::replace)};
  call.stream = progress && sse_ok;
  mcp_call_state st;
  st.id = id;
  st.method = method;
  st.server = server;
  st.tool = rec_.tool;
  st.session = session;
  st.stateless = mcp_stateless_;
  if (st.stateless) {
    // Cancelled by closing its stream (2026-07-28): no id to look up, and
    // ids repeat across clients (each SDK client counts from 0).
    mcp_call_ = std::move(st);
    return run_call(std::move(call), std::move(opts));
  }
  std::weak_ptr<connection> weak = shared_from_this();
  st.ticket =
      gw.track(session.empty() ? "key:" + (key_ ? key_->name() : "") : session,
               id, [gate = front_.gate, weak] {
                 post_to(gate, weak, [](connection& c) {
                   if (c.pending_ && c.mcp_call_)
                     c.call_.cancel();
                 });
               });
  if (st.ticket == 0) {
    rec_.rpc_error = mcp::invalid_request;
    return mcp_reply(200, mcp::error_response(id, mcp::invalid_request,
                                              "a request with this id is "
                                              "already in flight"));
  }
  mcp_call_ = std::move(st);
  run_call(std::move(call), std::move(opts));
}

std::string connection::mcp_outcome(const call_result& r) {
  switch (r.status) {
  case call_status::ok:
    // The tool's own failure is an answer; told apart for operators.
    return r.body.find("\"isError\":true") != std::string::npos ? "tool_error"
                                                                : "ok";
  case call_status::tool_busy:
    return "tool_busy";
  case call_status::upstream_error:
    return "rpc_error";
  case call_status::all_sources_exhausted:
    return "unavailable";
  case call_status::governance_backend_error:
    return "backend_error";
  case call_status::cancelled:
    return "cancelled";
  }
  return "unknown";
}

std::string connection::mcp_answer(const call_result& r) const {
  const auto& c = *mcp_call_;
  auto seconds = [](double s) { return std::max(s, 0.0); };
  switch (r.status) {
  case call_status::ok: {
    json result;
    try {
      result = json::parse(r.body);
    } catch (const std::exception&) {
    }
    if (!result.is_object())
      return mcp::error_response(c.id, mcp::internal_error,
                                 "server " + c.server +
                                     " answered no result object");
    if (c.stateless)
      stateless_result(c.method, result);
    return mcp::result_response(c.id, result);
  }
  case call_status::tool_busy: {
    json data{{"tier", r.busy_tier ? std::string{to_string(*r.busy_tier)}
                                   : std::string{"session"}},
              {"retry_after_s", seconds(r.retry_after_s)}};
    return mcp::error_response(c.id, mcp::tool_busy, "tool_busy", &data);
  }
  case call_status::upstream_error: {
    // The server's own JSON-RPC error, checked and written again.
    json err;
    try {
      err = json::parse(r.body);
    } catch (const std::exception&) {
    }
    json data{{"server", c.server}};
    if (err.is_object() && err.contains("code") &&
        err["code"].is_number_integer() && err.contains("message") &&
        err["message"].is_string()) {
      if (err.contains("data"))
        data["upstream"] = err["data"];
      auto code = err["code"].get<int>();
      if (c.stateless && code == mcp_resource_not_found)
        code = mcp::invalid_params; // 2026-07-28 retired -32002
      return mcp::error_response(c.id, code, err["message"].get<std::string>(),
                                 &data);
    }
    return mcp::error_response(c.id, mcp::internal_error,
                               "server " + c.server + " failed", &data);
  }
  case call_status::all_sources_exhausted: {
    json data{{"server", c.server},
              {"reason", r.reason},
              {"retry_after_s", seconds(r.retry_after_s)}};
    if (!r.attempts.empty() && !r.attempts.back().reason.empty())
      data["last_error"] = r.attempts.back().reason;
    return mcp::error_response(
        c.id, mcp::internal_error,
        "server " + c.server + " is unavailable (" + r.reason + ")", &data);
  }
  case call_status::governance_backend_error:
    return mcp::error_response(c.id, mcp::internal_error,
                               "governance backend unavailable");
  case call_status::cancelled:
    return mcp::error_response(c.id, -32800, "request cancelled");
  }
  return mcp::error_response(c.id, mcp::internal_error, "unknown outcome");
}

} // namespace sluice::node
