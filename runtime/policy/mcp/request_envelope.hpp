#pragma once

// Which era an MCP request on /mcp belongs to, and the checks of a
// sessionless one (revision 2026-07-28): no `initialize`, no session; each
// request names its revision and the client's capabilities in `_meta`, and
// repeats its method (and the name it acts on) in headers that proxies
// route and authorise by -- so a request whose headers say something other
// than its body is refused. Pure: the node reads the headers and the body's
// fields and hands them in.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::policy::mcp {

/// `_meta` keys of a 2026-07-28 request.
constexpr std::string_view meta_protocol_version =
    "io.modelcontextprotocol/protocolVersion";
constexpr std::string_view meta_client_capabilities =
    "io.modelcontextprotocol/clientCapabilities";

/// MCP 2026-07-28's error codes (HTTP 400 with each).
constexpr int header_mismatch = -32020;
constexpr int unsupported_protocol_version = -32022;

/// What a request says of itself, as read by the node.
struct request_envelope {
  /// An `Mcp-Session-Id` header came (the session era's).
  bool session_header = false;
  /// The `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers (unset:
  /// absent). `Mcp-Name` already decoded when it came as `=?base64?..?=`
  /// (unset also when that encoding was broken: it cannot match).
  std::optional<std::string_view> version_header;
  std::optional<std::string_view> method_header;
  std::optional<std::string_view> name_header;
  /// `Mcp-Name` came in `=?base64?...?=` that did not decode.
  bool name_header_bad = false;
  /// One of those headers, or `Mcp-Session-Id`, that came more than once
  /// (a proxy may have read another of its values than the gateway would).
  std::optional<std::string_view> repeated_header;
  /// A request (it has an id), not a notification or a response.
  bool request = false;
  std::string_view method;
  /// `_meta`'s protocol version: its text when a string; `meta_version_bad`
  /// when present but not a string.
  std::optional<std::string_view> meta_version;
  bool meta_version_bad = false;
  /// `_meta`'s client capabilities are there, as an object.
  bool meta_capabilities = false;
  /// `params.name` (tools/call, prompts/get) or `params.uri`
  /// (resources/read), when a string: what `Mcp-Name` must say.
  std::optional<std::string_view> acted_on;
};

/// The methods whose `Mcp-Name` header is required: the name (or URI) the
/// request acts on, or nullptr when the method has none.
const char* name_field_of(std::string_view method) noexcept;

/// Whether the request belongs to the sessionless era: it is
/// `server/discover`, or names its revision in `_meta`, or its
/// `MCP-Protocol-Version` header is a sessionless revision -- with or
/// without an `Mcp-Session-Id` (which that era ignores: the header must not
/// pick the path that checks less). Anything else (`initialize`, a request
/// of a session revision) is the session era's.
bool is_stateless_request(const request_envelope& e) noexcept;

/// The verdict on a sessionless request.
struct envelope_verdict {
  /// 0: go on, with `version`. Else the HTTP status (400) and JSON-RPC error
  /// to answer with.
  int code = 0;
  std::string message;
  std::string version;
  /// -32022: the revisions the gateway serves this way (`data.supported`)
  /// and the one asked for (`data.requested`, cut and printable).
  std::vector<std::string_view> supported;
  std::string requested;
  /// -32602: the `_meta` key missing (`data.envelope.missing`).
  std::string missing;
  /// -32020: the header that disagreed or was missing.
  std::string header;

  bool ok() const noexcept { return code == 0; }
};

/// The routing headers' check: no header repeated (-32020); a request's
/// `Mcp-Method` says its method, and `Mcp-Name` the name it acts on where
/// the method has one (-32020). `required`: they must be there (the
/// sessionless era); else only those present are held to the body (the
/// session era, which does not define them: a proxy may still route by
/// them).
envelope_verdict check_routing_headers(const request_envelope& e,
                                       bool required);

/// Checks a sessionless request (`is_stateless_request`), in this order:
/// `_meta`'s revision is there (-32602) and one served (-32022); a request's
/// client capabilities are there (-32602); `MCP-Protocol-Version` says the
/// same revision (-32020); then `check_routing_headers(e, true)`. A
/// notification carries no `Mcp-Method` (MCP sets it on requests only).
envelope_verdict check_envelope(const request_envelope& e);

} // namespace sluice::policy::mcp
