#include "sluice/actors/upstream/request.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <vector>

#include <boost/beast/core/string.hpp>

#include "sluice/runtime/policy/host_port.hpp"

namespace sluice {

std::string upstream_target(std::string_view base_path,
                            std::string_view route) {
  // Segments are what lies between slashes: "/a/b" holds "a" and "b".
  auto segments = [](std::string_view path) {
    std::vector<std::string_view> out;
    while (!path.empty() && path.front() == '/') {
      path.remove_prefix(1);
      auto end = std::min(path.find('/'), path.size());
      out.push_back(path.substr(0, end));
      path.remove_prefix(end);
    }
    return out;
  };
  auto base = segments(base_path);
  auto head = segments(route);
  std::string out{base_path};
  if (route.empty() || route.front() != '/' || head.size() < 2) {
    out += route;
    return out;
  }
  for (auto k = std::min(base.size(), head.size() - 1); k > 0; --k)
    if (std::equal(base.end() - k, base.end(), head.begin())) {
      // Skip the route's first k segments, each with its leading '/'.
      size_t skip = 0;
      for (size_t i = 0; i < k; ++i)
        skip += 1 + head[i].size();
      out += route.substr(skip);
      return out;
    }
  out += route;
  return out;
}

} // namespace sluice

namespace sluice::upstream {

namespace beast = boost::beast;

// A character of a TLS server name that is not an IP address.
bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
         c == '_';
}

// The parts of an `http[s]://HOST[:PORT][/PREFIX]` URL, or why it is
// refused (in `why`).
std::optional<parsed_url> parse_url(const std::string& url, std::string& why) {
  parsed_url u;
  u.https = url.compare(0, 8, "https://") == 0;
  const std::string scheme = u.https ? "https://" : "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    why = "must be http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH]";
    return std::nullopt;
  }
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    why = "no userinfo (user:password@) in the URL: put credentials in "
          "headers";
    return std::nullopt;
  }
  // The authority is HOST[:PORT] or [V6][:PORT]: the config's one parser
  // (runtime/policy/host_port), with the scheme's port as the default and
  // port 0 refused (nothing to connect to).
  try {
    auto hp = parse_host_port(authority, {uint16_t(u.https ? 443 : 80), 1});
    u.host = std::move(hp.host);
    u.port = std::to_string(hp.port);
  } catch (const std::invalid_argument& e) {
    why = std::string{e.what()} + " (http[s]://HOST[:PORT][/PATH], an IPv6 "
                                  "HOST in brackets)";
    return std::nullopt;
  }
  for (char c : u.prefix)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' ||
        c == '#') {
      why = "the path may not hold spaces, control characters, '?' or '#'";
      return std::nullopt;
    }
  if (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  return u;
}

// `text` (OpenSSL's reasons, our own words) fit inside a JSON string.
std::string json_safe(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c == '"' || c == '\\')
      out += '\'';
    else if (static_cast<unsigned char>(c) >= 0x20 &&
             static_cast<unsigned char>(c) < 0x7f)
      out += c;
  return out;
}

// Names a source in log lines: `NAME (URL)`, or the URL alone.
std::string log_label(const http_source_config& cfg) {
  return cfg.log_name.empty() ? cfg.base_url
                              : cfg.log_name + " (" + cfg.base_url + ")";
}

std::string header_value(const std::string& v) {
  if (v.compare(0, 4, "env:") == 0) {
    auto x = std::getenv(v.substr(4).c_str());
    return x ? x : "";
  }
  return v;
}

// A caller's header (`call_request::headers`) may go upstream: not one of
// the names the source owns (framing, routing, its credentials), and no
// byte that could end the header line or the field name early (the caller
// validated them; this keeps a slip from splitting the request).
bool forwardable(const std::string& name, const std::string& value) {
  // Framing, hop-by-hop and credential headers: never a caller's.
  static constexpr const char* owned[] = {
      "host",          "authorization",     "content-length",
      "content-type",  "transfer-encoding", "connection",
      "expect",        "te",                "upgrade",
      "keep-alive",    "proxy-connection",  "trailer",
      "content-encoding", "proxy-authorization", "api-key",
      "x-api-key",     "cookie"};
  if (name.empty())
    return false;
  for (auto own : owned)
    if (beast::iequals(name, own))
      return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view{"!#$%&'*+-.^_`|~"}.find(c) == std::string_view::npos)
      return false;
  // Visible ASCII, space and tab only (RFC 9110 field-value, without
  // obs-text): no control byte, no DEL.
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f)
      return false;
  }
  return true;
}


} // namespace sluice::upstream
