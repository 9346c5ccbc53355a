#include "sluice/runtime/policy/mcp/protocol_version.hpp"

#include <algorithm>
#include <array>

namespace sluice::policy::mcp {

namespace {

/// One revision the gateway speaks.
struct revision {
  std::string_view name;
  bool sessions;
};

/// Newest first: `negotiate` falls back to the first with sessions.
/// 2026-07-28 has none: each request carries its revision in `_meta`
/// (request_envelope.hpp).
constexpr std::array<revision, 3> revisions{{
    {"2026-07-28", false},
    {"2025-11-25", true},
    {"2025-06-18", true},
}};

std::vector<std::string_view> names_where(bool (*keep)(const revision&)) {
  std::vector<std::string_view> xs;
  for (auto& r : revisions)
    if (keep(r))
      xs.push_back(r.name);
  return xs;
}

const revision* find(std::string_view version) noexcept {
  for (auto& r : revisions)
    if (r.name == version)
      return &r;
  return nullptr;
}

} // namespace

/// `text` for an error message: at most `max_quoted_header_bytes`, each
/// byte outside printable ASCII (and the quote) shown as '?'.
std::string quoted_header(std::string_view text) {
  std::string out = "'";
  auto n = std::min(text.size(), max_quoted_header_bytes);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f && c != '\'' ? static_cast<char>(c) : '?';
  }
  if (n < text.size())
    out += "...";
  out += '\'';
  return out;
}

const std::vector<std::string_view>& supported_versions() noexcept {
  static const auto names = names_where([](const revision&) { return true; });
  return names;
}

const std::vector<std::string_view>& session_versions() noexcept {
  static const auto names =
      names_where([](const revision& r) { return r.sessions; });
  return names;
}

const std::vector<std::string_view>& stateless_versions() noexcept {
  static const auto names =
      names_where([](const revision& r) { return !r.sessions; });
  return names;
}

bool is_supported(std::string_view version) noexcept {
  return find(version) != nullptr;
}

bool server_version_ok(std::string_view version) noexcept {
  return has_sessions(version) || version == "2025-03-26" ||
         version == "2024-11-05";
}

std::string negotiate(std::string_view requested) {
  if (has_sessions(requested))
    return std::string{requested};
  return std::string{session_versions().front()};
}

bool is_stateless(std::string_view version) noexcept {
  auto r = find(version);
  return r != nullptr && !r->sessions;
}

header_verdict header_check(std::optional<std::string_view> header,
                            std::optional<std::string_view> session_version) {
  if (!header)
    return {};
  if (!has_sessions(*header)) {
    std::string supported;
    for (auto v : session_versions()) {
      if (!supported.empty())
        supported += ", ";
      supported += v;
    }
    return {header_verdict::kind::unsupported,
            "unsupported MCP-Protocol-Version " + quoted_header(*header) +
                " (supported: " + supported + ")"};
  }
  if (session_version && *session_version != *header)
    return {header_verdict::kind::mismatch,
            "MCP-Protocol-Version " + quoted_header(*header) +
                " differs from the session's negotiated " +
                quoted_header(*session_version)};
  return {};
}

bool has_sessions(std::string_view version) noexcept {
  auto r = find(version);
  return r != nullptr && r->sessions;
}

} // namespace sluice::policy::mcp
