#include "sluice/runtime/node/request_access.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

#include <boost/asio/ip/address.hpp>

#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/policy/host_port.hpp"

namespace sluice::node {

namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

access_verdict refused(access_verdict::kind what, std::string why) {
  access_verdict v;
  v.what = what;
  v.why = std::move(why);
  return v;
}

std::string_view text(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

// Where a request's `Origin` is from, as far as the node cares.
enum class origin_kind {
  /// No Origin header: no page of another origin sent it where it could
  /// act or read (browsers send one with every POST and every CORS
  /// request; a no-cors GET's answer stays unreadable to the page).
  none,
  /// The node's own: `http://` + its Host (a page the node served).
  own,
  /// In `node.allowed_origins`.
  listed,
  /// Another, with "*" in `node.allowed_origins`.
  any,
  /// Another; also "null" (a sandboxed page, a file) and several Origins.
  foreign,
};

origin_kind classify_origin(const http_fields& headers,
                            const access_context& ctx) {
  auto n = headers.count(http::field::origin);
  if (n == 0)
    return origin_kind::none;
  auto origin =
      n == 1 ? normal_origin(text(headers[http::field::origin])) : std::nullopt;
  if (!origin)
    return origin_kind::foreign;
  auto* listed = ctx.allowed_origins;
  if (listed != nullptr &&
      std::find(listed->begin(), listed->end(), *origin) != listed->end())
    return origin_kind::listed;
  // Only once its Host is checked: a rebound page's origin is its Host.
  if (headers.count(http::field::host) == 1)
    if (auto own =
            normal_origin("http://" + std::string{headers[http::field::host]});
        own && *own == *origin)
      return origin_kind::own;
  if (listed != nullptr &&
      std::find(listed->begin(), listed->end(), "*") != listed->end())
    return origin_kind::any;
  return origin_kind::foreign;
}

// Why a request served without a key (so with the node's own upstream
// credentials, or showing its state) is refused to a browser, if it is:
// a Host name not listed (DNS rebinding), an Origin of another site. The
// one place of that rule for every route; `remedy` ends the message.
std::optional<std::string> refuse_keyless(const http_fields& headers,
                                          const access_context& ctx,
                                          std::string_view remedy) {
  static const std::vector<std::string> none;
  auto host = headers.find(http::field::host);
  if (host != headers.end() &&
      !is_known_host(text(host->value()),
                     ctx.allowed_hosts ? *ctx.allowed_hosts : none))
    return "without a key, requests are served only to a Host that is an "
           "IP address, localhost or a name in node.allowed_hosts; \"" +
           echo_text(text(host->value())) +
           "\" is none of them (a page whose name was rebound to this "
           "address sends it: DNS rebinding); use the address, list the "
           "name in node.allowed_hosts, or " +
           std::string{remedy};
  switch (classify_origin(headers, ctx)) {
  case origin_kind::none:
  case origin_kind::own:
  case origin_kind::listed:
    return std::nullopt;
  case origin_kind::any:
  case origin_kind::foreign:
    break;
  }
  return "without a key, requests from a web page of another origin "
         "(Origin: " +
         echo_text(text(headers[http::field::origin])) +
         ") are refused: a page would use the node as its own; list the "
         "origin in node.allowed_origins to let its pages call, or " +
         std::string{remedy};
}

constexpr std::string_view ops_remedy = "send the admin key (auth.admin_key)";
constexpr std::string_view calls_remedy = "configure client keys (auth.keys)";

// Whether `value` is a plain list of header names (RFC 9110 tokens), to be
// echoed in Access-Control-Allow-Headers.
bool plain_header_list(std::string_view value) {
  if (value.empty() || value.size() > max_preflight_headers_bytes)
    return false;
  return std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view{"!#$%&'*+-.^_`|~, "}.find(c) !=
               std::string_view::npos;
  });
}

// A CORS preflight: may this origin's page send the request it describes?
// Browsers send it without credentials, so no key can be checked here.
access_verdict decide_preflight(std::string_view path,
                                const http_fields& headers,
                                const access_context& ctx) {
  if (ctx.on_admin_listener || is_operations_path(path))
    return refused(access_verdict::kind::forbidden,
                   "operations take no cross-origin requests (a CORS "
                   "preflight was sent)");
  // Without client keys the call it announces would be served keyless.
  if (!ctx.client_keys_configured)
    if (auto why = refuse_keyless(headers, ctx, calls_remedy))
      return refused(access_verdict::kind::forbidden, std::move(*why));
  auto from = classify_origin(headers, ctx);
  if (from == origin_kind::foreign ||
      (from == origin_kind::any && !ctx.client_keys_configured))
    return refused(access_verdict::kind::forbidden,
                   "pages of origin " +
                       echo_text(text(headers[http::field::origin])) +
                       " may not call this node: it is not in "
                       "node.allowed_origins");
  access_verdict v;
  v.what = access_verdict::kind::preflight;
  v.allow_origin = std::string{headers[http::field::origin]};
  return v;
}

access_verdict decide_operations(std::string_view path,
                                 const http_fields& headers,
                                 const access_context& ctx) {
  // A browser's cross-origin POST needs no preflight: a page the operator
  // visits must not reset breakers.
  if (path.rfind("/admin/", 0) == 0 && headers.count(http::field::origin) > 0)
    return refused(access_verdict::kind::forbidden,
                   "/admin/ takes no cross-origin requests (an Origin header "
                   "was sent)");
  auto presented = read_presented_key(headers);
  // The admin key comes only in Authorization (Bearer, or Basic below):
  // `api-key` / `x-api-key` are the SDKs' headers for client keys, and one
  // header for one key keeps what opens operations short to state.
  bool api_key_header = headers.count(http::field::authorization) == 0 &&
                        presented.what != presented_key::kind::none;
  if (api_key_header)
    presented = {};
  // A browser's Basic credentials: the password is the key. Not for
  // /admin/: a browser sends cached credentials by itself, so they open
  // only what the dashboard reads.
  std::optional<std::string> basic;
  if (auto a = headers.find(http::field::authorization);
      a != headers.end() && headers.count(http::field::authorization) == 1 &&
      path.rfind("/admin/", 0) != 0)
    basic = basic_password({a->value().data(), a->value().size()});
  if (basic) {
    presented.what = presented_key::kind::token;
    presented.token = *basic;
  }
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
    // Served without a key -- on a loopback main listener (a developer's
    // node) or on the admin listener: not to a web page (`refuse_keyless`).
    // A page whose name was rebound to the admin listener's address would
    // otherwise read /status and /metrics (a GET to its own origin sends
    // no Origin); scrapers that use a name list it in node.allowed_hosts.
    if (!ops.admin_key_presented)
      if (auto why = refuse_keyless(headers, ctx, ops_remedy))
        return refused(access_verdict::kind::forbidden, std::move(*why));
    return {};
  case ops_access::need_admin_key:
    return refused(access_verdict::kind::unauthorized,
                   api_key_header
                       ? "this endpoint takes the admin key only as "
                         "Authorization: Bearer ADMIN_KEY (or as the "
                         "password of Basic credentials), not as api-key "
                         "or x-api-key"
                   : presented.what == presented_key::kind::none
                       ? "this endpoint needs the admin key "
                         "(Authorization: Bearer ADMIN_KEY, or as the "
                         "password of Basic credentials)"
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

access_verdict decide_client(const http_fields& headers,
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

namespace {

// The host part of a Host header, in lower case, without its port;
// nothing if the header is malformed. A Host header brackets an IPv6
// address (parse_host_port would take a bare one when no port follows).
std::optional<std::string> host_of(std::string_view host) {
  if (host.empty() ||
      (host.front() != '[' && host.find(':') != host.rfind(':')))
    return std::nullopt;
  host_port hp;
  try {
    hp = parse_host_port(host, {uint16_t{80}, 0});
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  for (auto& c : hp.host)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::move(hp.host);
}

} // namespace

bool is_address_host(std::string_view host) {
  auto name = host_of(host);
  if (!name)
    return false;
  boost::system::error_code ec;
  net::ip::make_address(*name, ec);
  return !ec || *name == "localhost";
}

bool is_known_host(std::string_view host,
                   const std::vector<std::string>& names) {
  if (is_address_host(host))
    return true;
  if (names.empty() || host.empty() || host.front() == '[')
    return false;
  auto name = host_of(host);
  return name && std::find(names.begin(), names.end(), *name) != names.end();
}

void set_cors_headers(http_fields& h, std::string_view origin) {
  h.set(http::field::access_control_allow_origin,
        boost::beast::string_view{origin.data(), origin.size()});
  h.set(http::field::vary, "Origin");
  // Readable by the page besides the CORS-safelisted response headers.
  h.set(http::field::access_control_expose_headers,
        "X-Request-Id, Retry-After");
}

void set_preflight_headers(http_fields& h, std::string_view origin,
                           const http_fields& request) {
  set_cors_headers(h, origin);
  h.set(http::field::vary, "Origin, Access-Control-Request-Method, "
                           "Access-Control-Request-Headers");
  h.set(http::field::access_control_allow_methods, "GET, POST, OPTIONS");
  // SDKs send headers of their own (OpenAI's x-stainless-*): the page's
  // origin is allowed, so are the plain header names it asks for.
  std::string allowed = cors_allowed_headers;
  auto asked = request.find(http::field::access_control_request_headers);
  if (asked != request.end() &&
      request.count(http::field::access_control_request_headers) == 1 &&
      plain_header_list(text(asked->value())))
    allowed += ", " + std::string{asked->value()};
  h.set(http::field::access_control_allow_headers, allowed);
  h.set(http::field::access_control_max_age,
        std::to_string(preflight_max_age.count()));
}

bool is_dashboard_path(std::string_view path) noexcept {
  return path == "/dashboard" || path.rfind("/dashboard/", 0) == 0;
}

bool is_operations_path(std::string_view path) noexcept {
  return path == "/status" || path == "/metrics" || path == "/events" ||
         is_dashboard_path(path) || path.rfind("/admin/", 0) == 0;
}

std::optional<std::string> decode_base64(std::string_view value) {
  if (value.empty() || value.size() % 4 != 0)
    return std::nullopt;
  auto sextet = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  std::string decoded;
  decoded.reserve(value.size() / 4 * 3);
  for (size_t i = 0; i < value.size(); i += 4) {
    bool last = i + 4 == value.size();
    int pad = 0;
    uint32_t bits = 0;
    for (size_t j = 0; j < 4; ++j) {
      char c = value[i + j];
      if (c == '=' && last && j >= 2 && (j == 3 || value[i + 3] == '=')) {
        ++pad;
        bits <<= 6;
        continue;
      }
      auto v = sextet(c);
      if (v < 0 || pad > 0)
        return std::nullopt;
      bits = bits << 6 | static_cast<uint32_t>(v);
    }
    decoded += static_cast<char>(bits >> 16 & 0xff);
    if (pad < 2)
      decoded += static_cast<char>(bits >> 8 & 0xff);
    if (pad < 1)
      decoded += static_cast<char>(bits & 0xff);
  }
  return decoded;
}

std::optional<std::string> basic_password(std::string_view value) {
  constexpr std::string_view scheme = "basic ";
  if (value.size() < scheme.size())
    return std::nullopt;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (static_cast<char>(std::tolower(static_cast<unsigned char>(value[i]))) !=
        scheme[i])
      return std::nullopt;
  value.remove_prefix(scheme.size());
  while (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  auto decoded = decode_base64(value);
  if (!decoded)
    return std::nullopt;
  auto colon = decoded->find(':');
  if (colon == std::string::npos || colon + 1 == decoded->size())
    return std::nullopt;
  return decoded->substr(colon + 1);
}

access_verdict decide_access(http::verb method, std::string_view path,
                             const http_fields& headers,
                             const access_context& ctx) {
  if (path == "/healthz")
    return {};
  if (method == http::verb::options && headers.count(http::field::origin) > 0 &&
      headers.count(http::field::access_control_request_method) > 0)
    return decide_preflight(path, headers, ctx);
  if (is_operations_path(path))
    return decide_operations(path, headers, ctx);
  if (ctx.on_admin_listener)
    return {}; // the router answers 404: no calls here
  auto v = decide_client(headers, ctx);
  auto from = classify_origin(headers, ctx);
  if (v.what != access_verdict::kind::allowed) {
    // A browser client of an allowed origin may read why its key failed.
    if (from == origin_kind::listed || from == origin_kind::any)
      v.allow_origin = std::string{headers[http::field::origin]};
    return v;
  }
  // No key: the node's own upstream credentials would serve a web page.
  if (v.key == nullptr)
    if (auto why = refuse_keyless(headers, ctx, calls_remedy))
      return refused(access_verdict::kind::forbidden, std::move(*why));
  if (from == origin_kind::listed || (from == origin_kind::any && v.key))
    v.allow_origin = std::string{headers[http::field::origin]};
  return v;
}

} // namespace sluice::node
