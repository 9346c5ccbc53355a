#pragma once

// Which MCP revision a session speaks: the answer to `initialize` and the
// check of the `MCP-Protocol-Version` header on every later HTTP request.
// Pure.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy::mcp {

/// The revision a server assumes when a request carries no
/// `MCP-Protocol-Version` header and nothing else tells it (the spec's
/// backwards-compatibility rule).
constexpr std::string_view assumed_version = "2025-03-26";

/// The revisions the gateway speaks, newest first: "2026-07-28" (no
/// sessions: the official TypeScript SDK 2.x client's), "2025-11-25" (the
/// latest of SDK 1.32.2), "2025-06-18".
const std::vector<std::string_view>& supported_versions() noexcept;

/// Those of them with sessions (`initialize`, `Mcp-Session-Id`), newest
/// first: what `initialize` negotiates, and what the gateway asks its tool
/// servers for.
const std::vector<std::string_view>& session_versions() noexcept;

/// Those without: each request names its revision in `_meta`
/// (request_envelope.hpp); `server/discover` lists them.
const std::vector<std::string_view>& stateless_versions() noexcept;

/// Whether `version` is one of `stateless_versions()`.
bool is_stateless(std::string_view version) noexcept;

/// Whether the gateway speaks revision `version` (an exact match).
bool is_supported(std::string_view version) noexcept;

/// Whether the gateway, as a client of a tool server, goes on with the
/// revision `version` that server answered its `initialize` with: one the
/// gateway speaks with sessions, or an older one the official SDK's client
/// still accepts
/// ("2025-03-26", "2024-11-05": many servers in the wild). Anything else
/// (and never a text that is not one of them: it goes into a header) ends
/// the start.
bool server_version_ok(std::string_view version) noexcept;

/// The revision to answer an `initialize` that asked for `requested`: that
/// one if the gateway speaks it with sessions, else the newest such. MCP's
/// rule: the server answers with a revision it supports and the client
/// decides whether to go on with it. (A sessionless revision has no
/// `initialize`: asked for one, the gateway answers 2025-11-25.)
std::string negotiate(std::string_view requested);

/// The verdict on a request's `MCP-Protocol-Version` header.
struct header_verdict {
  enum class kind {
    /// Go on.
    ok,
    /// A revision the gateway does not speak with sessions (HTTP 400 in
    /// the caller).
    unsupported,
    /// A revision other than the one the session negotiated (HTTP 400).
    mismatch,
  };

  kind what = kind::ok;

  /// Why not, for the response body; empty when ok.
  std::string error;

  bool ok() const noexcept { return what == kind::ok; }
};

/// Longest slice of a header value quoted in `header_verdict::error` (the
/// text goes back to the client; a hostile header must not fill it).
constexpr size_t max_quoted_header_bytes = 64;

/// `text` quoted for an error message: at most `max_quoted_header_bytes`,
/// each byte outside printable ASCII (and the quote) shown as '?'.
std::string quoted_header(std::string_view text);

/// Checks the `MCP-Protocol-Version` header `header` (unset: absent) of a
/// request in a session that negotiated `session_version` (unset: no
/// session, or none known). An absent header is ok: the spec says to assume
/// the negotiated revision, or `assumed_version` when nothing is known.
/// NOTE: we accept the latter although we do not speak 2025-03-26 -- a
/// client that sends no header is served as if it spoke the negotiated (or
/// newest) revision rather than refused.
header_verdict header_check(std::optional<std::string_view> header,
                            std::optional<std::string_view> session_version);

/// Whether revision `version` has sessions (`Mcp-Session-Id` handed out at
/// `initialize` and sent back on every request): one of
/// `session_versions()`. False for 2026-07-28 and for any unknown text.
bool has_sessions(std::string_view version) noexcept;

} // namespace sluice::policy::mcp
