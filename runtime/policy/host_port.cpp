#include "sluice/runtime/policy/host_port.hpp"

#include <stdexcept>

#include <arpa/inet.h>
#include <netinet/in.h>

namespace sluice {

namespace {

/// Longest label of a DNS name (RFC 1035).
constexpr size_t label_length_limit = 63;

/// Longest port: five digits.
constexpr size_t port_digits_limit = 5;

[[noreturn]] void refuse(const std::string& why) {
  throw std::invalid_argument(why);
}

bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z');
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

uint16_t parse_port(std::string_view s, uint16_t min_port) {
  // The message is made only for a refusal: a Host header is parsed on
  // every request.
  auto out_of_range = [&] {
    refuse("the port must be a number in " + std::to_string(min_port) +
           "..65535, got '" + std::string{s} + "'");
  };
  if (s.empty() || s.size() > port_digits_limit)
    out_of_range();
  uint32_t p = 0;
  for (auto c : s) {
    if (c < '0' || c > '9')
      out_of_range();
    p = p * 10 + static_cast<uint32_t>(c - '0');
  }
  if (p < min_port || p > 65535)
    out_of_range();
  return static_cast<uint16_t>(p);
}

void check_hostname(std::string_view h) {
  if (h.empty())
    refuse("the host is empty");
  if (h.size() > host_length_limit)
    refuse("the host is longer than 253 characters");
  size_t start = 0;
  while (start <= h.size()) {
    auto dot = h.find('.', start);
    auto label =
        h.substr(start, dot == std::string_view::npos ? std::string_view::npos
                                                      : dot - start);
    if (label.empty())
      refuse("the host '" + std::string{h} + "' has an empty label");
    if (label.size() > label_length_limit)
      refuse("a label of the host is longer than 63 characters");
    if (label.front() == '-' || label.back() == '-')
      refuse("a label of the host starts or ends with '-'");
    for (auto c : label)
      if (!is_alnum(c) && c != '-' && c != '_')
        refuse("the host '" + std::string{h} +
               "' may only hold letters, digits, '-', '_' and '.' (IPv6 in "
               "brackets)");
    if (dot == std::string_view::npos)
      break;
    start = dot + 1;
  }
}

void check_ipv6(std::string_view h) {
  if (h.empty())
    refuse("the IPv6 address in brackets is empty");
  if (h.size() > host_length_limit)
    refuse("the IPv6 address is too long");
  bool colon = false;
  for (auto c : h) {
    colon = colon || c == ':';
    if (!is_hex(c) && c != ':' && c != '.')
      refuse("the IPv6 address '" + std::string{h} +
             "' may only hold hex digits, ':' and '.'");
  }
  if (!colon)
    refuse("brackets are for IPv6 addresses, got '" + std::string{h} + "'");
  in6_addr ignored{};
  if (inet_pton(AF_INET6, std::string{h}.c_str(), &ignored) != 1)
    refuse("'" + std::string{h} + "' in brackets is not an IPv6 address");
}

} // namespace

host_port parse_host_port(std::string_view text, host_port_rules rules) {
  host_port out;
  std::string_view rest;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos)
      refuse("an IPv6 address needs its closing ']'");
    auto host = text.substr(1, close - 1);
    check_ipv6(host);
    out.host = std::string{host};
    rest = text.substr(close + 1);
    if (rest.empty()) {
      if (!rules.default_port)
        refuse("needs a port: [V6]:PORT");
      out.port = *rules.default_port;
      return out;
    }
    if (rest.front() != ':')
      refuse("after ']' comes ':PORT', got '" + std::string{rest} + "'");
    out.port = parse_port(rest.substr(1), rules.min_port);
    return out;
  }
  auto colon = text.find(':');
  if (colon != std::string_view::npos &&
      text.find(':', colon + 1) != std::string_view::npos)
    refuse("an IPv6 address needs brackets: [V6]:PORT");
  auto host = text.substr(0, colon);
  check_hostname(host);
  out.host = std::string{host};
  if (colon == std::string_view::npos) {
    if (!rules.default_port)
      refuse("needs a port: HOST:PORT");
    out.port = *rules.default_port;
    return out;
  }
  out.port = parse_port(text.substr(colon + 1), rules.min_port);
  return out;
}

std::optional<std::string> normal_origin(std::string_view text) {
  auto sep = text.find("://");
  if (sep == std::string_view::npos || sep == 0)
    return std::nullopt;
  std::string out;
  // The scheme (RFC 3986): ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
  for (auto c : text.substr(0, sep)) {
    if (!is_alnum(c) && c != '+' && c != '-' && c != '.')
      return std::nullopt;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (!(out.front() >= 'a' && out.front() <= 'z'))
    return std::nullopt;
  auto authority = text.substr(sep + 3);
  if (authority.find_first_of("/?#@") != std::string_view::npos)
    return std::nullopt;
  auto close = authority.find(']');
  bool has_port =
      authority.find(':', close == std::string_view::npos ? 0 : close) !=
      std::string_view::npos;
  if (!authority.empty() && authority.front() == '[' &&
      close == std::string_view::npos)
    return std::nullopt;
  uint16_t default_port = out == "http" ? 80 : out == "https" ? 443 : 0;
  host_port hp;
  try {
    hp = parse_host_port(authority, {default_port, 0});
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
  for (auto& c : hp.host)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  out += "://" + bracketed(hp.host);
  if (has_port && (default_port == 0 || hp.port != default_port))
    out += ":" + std::to_string(hp.port);
  return out;
}

std::string bracketed(std::string_view host) {
  if (host.find(':') != std::string_view::npos)
    return "[" + std::string{host} + "]";
  return std::string{host};
}

std::string to_string(const host_port& x) {
  return bracketed(x.host) + ":" + std::to_string(x.port);
}

} // namespace sluice
