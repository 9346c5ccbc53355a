#pragma once

// When a tool call may be sent again (SPEC: "A tool call is retried only
// when safe: the request never reached the server (connect refused, breaker
// open, admission at the upstream), or the tool is annotated readOnlyHint
// or idempotentHint; never otherwise."). Pure.

#include <optional>

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

} // namespace sluice::policy::mcp
