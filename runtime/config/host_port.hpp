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

/// Parses `HOST:PORT`, `[V6]:PORT` or, with `default_port`, a bare `HOST` or
/// `[V6]`. Strict: the port is 1 to 5 digits and at most 65535 (0 is
/// allowed: "any free port" for a listener; callers that need a real port
/// check it); a hostname is dot-separated labels of letters, digits, '-'
/// and '_' (no leading or trailing '-', at most 63 characters each); an
/// IPv6 address must be bracketed when a port follows, and holds only hex
/// digits, ':' and '.'. Throws `std::invalid_argument` whose message says
/// what is wrong (no key: callers wrap it in a `config_error`).
host_port parse_host_port(std::string_view text,
                          std::optional<uint16_t> default_port = std::nullopt);

} // namespace sluice
