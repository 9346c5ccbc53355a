#pragma once

// When a tool call may be sent again (SPEC: "A tool call is retried only
// when safe: the request never reached the server (connect refused, breaker
// open, admission at the upstream), or the tool is annotated readOnlyHint
// or idempotentHint; never otherwise."). Pure.

#include <optional>

#include "sluice/runtime/policy/outcome.hpp"

namespace sluice::policy::mcp {

/// How far a `tools/call` got towards its server.
enum class delivery {
  /// It never left the gateway: the connect was refused, the breaker was
  /// open, the upstream's admission turned it away.
  not_sent,
  /// The server read it (and may have acted on it).
  sent,
  /// Written, with no sign it was read (a reset after the write): treated
  /// as `sent`, since the server may have acted on it.
  unknown,
};

/// A tool's annotations as they bear on retrying, with MCP's defaults for
/// the ones a server leaves out: not read-only, not idempotent,
/// destructive. NOTE: MCP calls annotations untrusted hints; the gateway
/// trusts those of the servers its operator configured.
struct tool_hints {
  /// `readOnlyHint`: the tool does not modify its environment.
  bool read_only = false;
  /// `idempotentHint`: calling it again with the same arguments has no
  /// further effect.
  bool idempotent = false;
  /// `destructiveHint`: it may destroy rather than only add. Does not
  /// bear on retrying (an idempotent delete is safe to repeat); kept for
  /// the listing.
  bool destructive = true;

  friend bool operator==(const tool_hints& x, const tool_hints& y) noexcept {
    return x.read_only == y.read_only && x.idempotent == y.idempotent &&
           x.destructive == y.destructive;
  }
  friend bool operator!=(const tool_hints& x, const tool_hints& y) noexcept {
    return !(x == y);
  }
};

/// The hints of a tool whose annotations say `read_only`, `idempotent` and
/// `destructive` (each unset when the annotation is absent), MCP's default
/// standing in for each absent one.
tool_hints hints_of(std::optional<bool> read_only,
                    std::optional<bool> idempotent,
                    std::optional<bool> destructive) noexcept;

/// Whether a call that failed after getting as far as `how_far` may be sent
/// again: always when it was never sent, otherwise only to a read-only or
/// idempotent tool.
bool may_retry(delivery how_far, const tool_hints& hints) noexcept;

/// What a Streamable HTTP server's status says of a message POSTed to it
/// when no JSON-RPC answer came with it (SPEC §13: HTTP 5xx count as
/// failures; admission at the upstream means it was never sent).
struct http_status_verdict {
  /// Not a failure (2xx).
  bool ok = true;
  delivery how_far = delivery::sent;
  /// How the call waiting for it fails: `transient` counts against the
  /// server's breaker, `permanent` (a refusal of this request, or of the
  /// gateway's credentials) does not.
  outcome_kind kind = outcome_kind::transient;
  /// The server no longer knows the session (404 to a request that carried
  /// one): the gateway starts a new one.
  bool session_gone = false;
};

/// 2xx: ok. 429: its admission turned the request away (not sent). 503 is
/// not taken for that: a proxy in front of the server (Envoy's "upstream
/// reset") answers it after it passed the request on.
/// 404 with a session: the session is gone (not sent); without one, no
/// server at that path (not sent, transient). A 400 to a request with a
/// session whose error speaks of the session (`about_session`: the
/// reference server answers a session it lost so, not with 404): the
/// session is gone too. 408: timeout, delivery unknown. 401, 403, 400 and
/// the other 4xx: a refusal before any tool ran (not sent, permanent).
/// `own_error`: the body is a JSON-RPC error answering this request (an id,
/// not null) that does not speak of the session: a 404 or 400 with it is
/// that request's refusal, not a lost session (so one request cannot end
/// the session every other call shares).
/// Other statuses (5xx with 503, and anything else): the server may have begun
/// the call (unknown), transient.
http_status_verdict classify_http_status(int status, bool had_session,
                                         bool about_session = false,
                                         bool own_error = false) noexcept;

} // namespace sluice::policy::mcp
