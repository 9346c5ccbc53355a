#pragma once

// What an HTTP source sends upstream, before any I/O: its base URL taken
// apart, the headers it may forward for a caller, and the words it puts in
// log lines and error bodies. Pure; private to the HTTP source.

#include <optional>
#include <string>
#include <string_view>

#include "sluice/runtime/policy/source/http_settings.hpp"

namespace sluice {

/// The path an HTTP source sends a call on `route` to, its `base_url` path
/// being `base_path` (no trailing '/'): `base_path + route`, except that
/// whole path segments the base path ends with and the route starts with
/// are written once, the longest such overlap that leaves the route a
/// segment of its own. So `/v1` + `/v1/chat/completions` is
/// `/v1/chat/completions` (a base URL copied from a provider's docs,
/// `https://api.openai.com/v1`, works), `/openai/v1` + `/v1/x` is
/// `/openai/v1/x`, and `/api` + `/v1/x` or `/v1` + `/v10/x` join plainly.
std::string upstream_target(std::string_view base_path, std::string_view route);

} // namespace sluice

namespace sluice::upstream {

/// An `http[s]://HOST[:PORT][/PREFIX]` URL, taken apart.
struct parsed_url {
  std::string host; // without brackets
  std::string port;
  std::string prefix;
  bool https = false;
};

/// Letters, digits, '-', '.', '_': what a host name may hold.
bool is_host_char(char c);

/// The parts of an `http[s]://HOST[:PORT][/PREFIX]` URL, or why it is
/// refused (in `why`).
std::optional<parsed_url> parse_url(const std::string& url, std::string& why);

/// `text` (OpenSSL's reasons, our own words) made fit inside a JSON string.
std::string json_safe(const std::string& text);

/// Names a source in log lines: `NAME (URL)`, or the URL alone.
std::string log_label(const http_source_config& cfg);

/// A configured header value: `env:VAR` is the variable's value (empty if
/// unset; `validate` refuses that), anything else as it is.
std::string header_value(const std::string& v);

/// Whether a caller's header (`call_request::headers`) may go upstream:
/// not one of the names the source owns (framing, routing, credentials),
/// and no byte that could end the header line or the field name early.
bool forwardable(const std::string& name, const std::string& value);

} // namespace sluice::upstream
