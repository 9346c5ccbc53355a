#include "sluice/runtime/node/request_access.hpp"

namespace sluice::node {

namespace http = boost::beast::http;

namespace {

access_verdict refused(access_verdict::kind what, std::string why) {
  access_verdict v;
  v.what = what;
  v.why = std::move(why);
  return v;
}

access_verdict decide_operations(std::string_view path,
                                 const http::fields& headers,
                                 const access_context& ctx) {
  // A browser's cross-origin POST needs no preflight: a page the operator
  // visits must not reset breakers.
  if (path.rfind("/admin/", 0) == 0 && headers.count(http::field::origin) > 0)
    return refused(access_verdict::kind::forbidden,
                   "/admin/ takes no cross-origin requests (an Origin header "
                   "was sent)");
  auto presented = read_presented_key(headers);
  ops_request ops;
  ops.on_admin_listener = ctx.on_admin_listener;
  ops.admin_key_configured = ctx.admin_key_configured;
  ops.admin_key_presented = presented.what == presented_key::kind::token &&
                            ctx.is_admin_key &&
                            ctx.is_admin_key(presented.token);
  ops.admin_listener_configured = ctx.admin_listener_configured;
  ops.main_listener_loopback = ctx.main_listener_loopback;
  ops.client_keys_configured = ctx.client_keys_configured;
  switch (decide_ops_access(ops)) {
  case ops_access::allowed:
    return {};
  case ops_access::need_admin_key:
    return refused(access_verdict::kind::unauthorized,
                   presented.what == presented_key::kind::none
                       ? "this endpoint needs the admin key "
                         "(Authorization: Bearer ADMIN_KEY)"
                       : "incorrect admin key");
  case ops_access::not_here:
    return refused(access_verdict::kind::forbidden,
                   ctx.admin_listener_configured
                       ? "operations are served on node.admin_listen"
                       : "operations are not served here without "
                         "auth.admin_key (this listener is not loopback, or "
                         "it serves client keys); set auth.admin_key or "
                         "node.admin_listen");
  }
  return refused(access_verdict::kind::forbidden, "operations are refused");
}

access_verdict decide_client(const http::fields& headers,
                             const access_context& ctx) {
  if (!ctx.client_keys_configured)
    return {};
  auto presented = read_presented_key(headers);
  switch (presented.what) {
  case presented_key::kind::none:
    return refused(access_verdict::kind::unauthorized,
                   "You didn't provide an API key. Send it as "
                   "Authorization: Bearer KEY");
  case presented_key::kind::malformed:
    return refused(access_verdict::kind::unauthorized,
                   "Malformed API key header: use Authorization: "
                   "Bearer KEY (or api-key / x-api-key), once");
  case presented_key::kind::token:
    break;
  }
  access_verdict v;
  v.key = ctx.find_key ? ctx.find_key(presented.token) : nullptr;
  if (v.key == nullptr)
    return refused(access_verdict::kind::unauthorized,
                   "Incorrect API key provided");
  return v;
}

} // namespace

bool is_operations_path(std::string_view path) noexcept {
  return path == "/status" || path == "/metrics" || path == "/events" ||
         path.rfind("/admin/", 0) == 0;
}

access_verdict decide_access(std::string_view path, const http::fields& headers,
                             const access_context& ctx) {
  if (path == "/healthz")
    return {};
  if (is_operations_path(path))
    return decide_operations(path, headers, ctx);
  if (ctx.on_admin_listener)
    return {}; // the router answers 404: no calls here
  return decide_client(headers, ctx);
}

} // namespace sluice::node
