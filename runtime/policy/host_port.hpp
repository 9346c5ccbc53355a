#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

/// A network endpoint as the config names it: a host (a hostname, an IPv4
/// address, or an IPv6 address *without* its brackets, ready for a
/// resolver or `make_address`) and a port.
struct host_port {
  std::string host;
  uint16_t port = 0;
};

/// Longest host accepted: a DNS name is at most 253 characters.
constexpr size_t host_length_limit = 253;

/// What a caller accepts besides `HOST:PORT`.
struct host_port_rules {
  /// The port when the text names none (a bare `HOST` or `[V6]`); unset:
  /// the port is required.
  std::optional<uint16_t> default_port;
  /// The lowest port accepted: 0 for a listener ("any free port"), 1 for an
  /// address to connect to (Redis, an upstream).
  uint16_t min_port = 0;
};

/// The one parser of `HOST:PORT` and `[V6]:PORT` in Sluice: `node.listen`,
/// `node.admin_listen`, `--listen`, `backend.address` and the authority of
/// an HTTP source's `base_url` all go through it. Strict: the port is 1 to
/// 5 digits, in `[rules.min_port, 65535]`; a hostname is dot-separated
/// labels of letters, digits, '-' and '_' (no leading or trailing '-', at
/// most 63 characters each); an IPv6 address must be bracketed when a port
/// follows, and must be one (`inet_pton`). Throws `std::invalid_argument`
/// whose message says what is wrong (no key: callers wrap it in a
/// `config_error` naming theirs, or prefix their field's name).
host_port parse_host_port(std::string_view text, host_port_rules rules = {});

/// `host` as the authority of a URL or an address to print: an IPv6
/// address in brackets, anything else as it is.
std::string bracketed(std::string_view host);

/// `HOST:PORT`, or `[V6]:PORT`: what `parse_host_port` reads back.
std::string to_string(const host_port& x);

/// A web origin (RFC 6454 §6.2) as browsers write it in `Origin`:
/// `SCHEME://HOST[:PORT]` with the scheme and host in lowercase, no port
/// when it is the scheme's default (80 for http, 443 for https) and an
/// IPv6 host in brackets -- so equal origins give equal text however they
/// were written. Nothing for what is not one: "null" (a sandboxed page or
/// a file), a path, a query, userinfo, an empty host.
std::optional<std::string> normal_origin(std::string_view text);

} // namespace sluice
