#include "sluice/runtime/node/endpoint.hpp"

#include <algorithm>

#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/node/request_reading.hpp"

namespace sluice::node {

namespace http = boost::beast::http;

namespace {

endpoint_choice refuse(errc code, std::string why) {
  return node::refused<endpoint_choice>(code, std::move(why));
}

// `to` if `method` is the one it takes, else 405 with `usage`.
endpoint_choice only(http::verb method, http::verb v, endpoint to,
                     const char* usage, std::string arg = {}) {
  if (method != v)
    return refuse(errc::method_not_allowed, usage);
  endpoint_choice out;
  out.to = to;
  out.arg = std::move(arg);
  return out;
}

} // namespace

endpoint_choice
choose_endpoint(std::string_view target, http::verb method,
                bool on_admin_listener,
                const std::function<bool(const std::string&)>& has_route) {
  auto path = request_path(target);
  if (!path)
    return refuse(errc::bad_request,
                   "the request target must be a path (origin-form) or an "
                   "absolute http URL");
  if (*path == "/healthz")
    return only(method, http::verb::get, endpoint::healthz, "use GET /healthz");
  if (path->rfind("/admin/", 0) == 0)
    return only(method, http::verb::post, endpoint::admin_action,
                "use POST on /admin/reload or /admin/breakers/SOURCE/ACTION",
                std::string{path->substr(7)});
  if (*path == "/status")
    return only(method, http::verb::get, endpoint::status, "use GET /status");
  if (*path == "/events")
    return only(method, http::verb::get, endpoint::events, "use GET /events");
  if (*path == "/metrics")
    return only(method, http::verb::get, endpoint::metrics, "use GET /metrics");
  if (*path == "/dashboard" || path->rfind("/dashboard/", 0) == 0)
    return only(method, http::verb::get, endpoint::dashboard,
                "use GET /dashboard",
                path->size() > 11 ? std::string{path->substr(11)}
                                  : std::string{});
  if (on_admin_listener)
    return refuse(errc::not_found,
                   "the admin listener serves /healthz, /status, /metrics, "
                   "/events, /dashboard and /admin/ only; calls go to "
                   "node.listen");
  if (*path == "/v1/models" || path->rfind("/v1/models/", 0) == 0) {
    if (method != http::verb::get)
      return refuse(errc::method_not_allowed, "use GET /v1/models");
    auto id = percent_decode(path->substr(std::min(path->size(), size_t{11})));
    if (!id)
      return refuse(errc::bad_request, "malformed model id");
    return only(method, http::verb::get, endpoint::models, "", std::move(*id));
  }
  if (*path == "/mcp") {
    endpoint_choice out;
    out.to = endpoint::mcp;
    return out;
  }
  std::string route{*path};
  if (!has_route || !has_route(route))
    return refuse(errc::not_found, "no route " + echo_text(route));
  return only(method, http::verb::post, endpoint::call,
              "use POST on a call route", std::move(route));
}

} // namespace sluice::node
