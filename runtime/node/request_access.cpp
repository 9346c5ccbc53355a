#include "sluice/runtime/node/request_access.hpp"

#include <cctype>
#include <cstdint>

#include <boost/asio/ip/address.hpp>

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
    // Served without a key on a loopback main listener (a developer's
    // node): only to a Host that is an address or localhost, so a web page
    // whose name was rebound to 127.0.0.1 (DNS rebinding) cannot read it.
    // The admin listener is the operator's choice of network; scrapers
    // there may use names.
    if (!ops.admin_key_presented && !ctx.on_admin_listener) {
      auto host = headers.find(http::field::host);
      if (host != headers.end() &&
          !is_address_host({host->value().data(), host->value().size()}))
        return refused(access_verdict::kind::forbidden,
                       "operations without a key are served only to a Host "
                       "that is an IP address or localhost (this one is a "
                       "name: DNS rebinding); use the address, or set "
                       "auth.admin_key");
    }
    return {};
  case ops_access::need_admin_key:
    return refused(access_verdict::kind::unauthorized,
                   presented.what == presented_key::kind::none
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

bool is_address_host(std::string_view host) {
  // A Host header brackets an IPv6 address (parse_host_port would take a
  // bare one when no port follows).
  if (host.empty() ||
      (host.front() != '[' && host.find(':') != host.rfind(':')))
    return false;
  host_port hp;
  try {
    hp = parse_host_port(host, {uint16_t{80}, 0});
  } catch (const std::invalid_argument&) {
    return false;
  }
  std::string lower;
  for (char c : hp.host)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  boost::system::error_code ec;
  net::ip::make_address(lower, ec);
  return !ec || lower == "localhost";
}

bool is_dashboard_path(std::string_view path) noexcept {
  return path == "/dashboard" || path.rfind("/dashboard/", 0) == 0;
}

bool is_operations_path(std::string_view path) noexcept {
  return path == "/status" || path == "/metrics" || path == "/events" ||
         is_dashboard_path(path) || path.rfind("/admin/", 0) == 0;
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
  // Base64 (RFC 4648), padded to a multiple of four.
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
  auto colon = decoded.find(':');
  if (colon == std::string::npos || colon + 1 == decoded.size())
    return std::nullopt;
  return decoded.substr(colon + 1);
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
