#pragma once

// The tools of several MCP servers under one gateway: each server's tools
// are listed under a prefix of its own ("everything_" + "echo"), and a
// gateway name resolves back to the server and the tool's own name. Also a
// client key's allowed tools. Pure.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/mcp/retry_safety.hpp"

namespace sluice::policy::mcp {

/// Longest tool prefix accepted for a server.
constexpr size_t max_prefix_bytes = 64;

/// Longest tool name, on a server and at the gateway (MCP 2025-11-25: tool
/// names are 1 to 128 bytes of [A-Za-z0-9_.-]).
constexpr size_t max_tool_name_bytes = 128;

/// Most tools read from one server's listing; the rest are left out.
constexpr size_t max_tools_per_server = 4096;

/// Longest slice of a left-out tool's name kept in a report (a hostile
/// server's name may be megabytes).
constexpr size_t max_reported_name_bytes = 256;

/// Whether `name` is a tool name: 1 to `max_tool_name_bytes` bytes of
/// A-Z, a-z, 0-9, '_', '.', '-'.
bool valid_tool_name(std::string_view name) noexcept;

/// Whether `prefix` is a tool prefix: 0 to `max_prefix_bytes` bytes of the
/// same characters.
bool valid_prefix(std::string_view prefix) noexcept;

/// One tool as a server lists it.
struct tool_entry {
  std::string name;
  tool_hints hints;
};

/// A tool as the gateway lists it, and where a call to it goes.
struct resolved_tool {
  /// Prefix and name: what clients see and call.
  std::string gateway_name;
  /// The server that offers it.
  std::string server;
  /// Its name on that server.
  std::string name;
  tool_hints hints;
};

/// A server's tool the gateway does not offer, and why.
struct left_out_tool {
  enum class reason {
    /// Its name is no tool name (empty, too long or a byte outside
    /// [A-Za-z0-9_.-]).
    bad_name,
    /// Prefix and name are longer than `max_tool_name_bytes`.
    too_long,
    /// The server listed the name twice; the first stays.
    duplicate,
    /// Another server's tool has the same gateway name, and that server
    /// was added first: it keeps the name.
    collision,
  };

  reason why;
  /// The server whose tool is left out.
  std::string server;
  /// The tool's name on that server (cut to `max_reported_name_bytes`).
  std::string name;
  /// The gateway name it would have had (empty for `bad_name`, cut like
  /// `name` for `too_long`).
  std::string gateway_name;
  /// For a collision: the server that keeps `gateway_name`.
  std::string holder;
};

/// What `tool_directory::set_tools` left out.
struct tools_report {
  /// The server's tools left out for their names, and every collision the
  /// server takes part in (as the one left out or as the holder).
  std::vector<left_out_tool> left_out;
  /// Tools past the first `max_tools_per_server` of the listing, left out
  /// unread.
  size_t over_limit = 0;

  bool clean() const noexcept { return left_out.empty() && over_limit == 0; }
};

/// The tools of the gateway's servers under their gateway names. A gateway
/// name is the server's prefix followed by the tool's name; when two
/// servers' tools would share one, the server added first keeps it and the
/// other's tool is left out (and reported), whichever listing arrived
/// first. Bounded: `max_tools_per_server` tools per server.
class tool_directory {
public:
  /// Adds server `server` with tool prefix `prefix` (may be empty). Throws
  /// `std::invalid_argument` for an empty or duplicate server name or a
  /// prefix that is not 0 to 64 bytes of [A-Za-z0-9_.-]. Two servers may
  /// share a prefix here (their same-named tools collide); the config check
  /// refuses that with `check_prefixes`.
  void add_server(std::string server, std::string prefix);

  /// Replaces the tools of `server` with `tools` (its `tools/list`, in the
  /// server's order) and says what was left out. Throws
  /// `std::invalid_argument` for a server never added.
  tools_report set_tools(std::string_view server,
                         std::vector<tool_entry> tools);

  /// The tool clients call `gateway_name`, if there is one.
  std::optional<resolved_tool> resolve(std::string_view gateway_name) const;

  /// Every tool offered: the servers in the order they were added, each
  /// server's tools in the order it listed them.
  std::vector<resolved_tool> list() const;

  /// Every tool left out by a collision now.
  const std::vector<left_out_tool>& collisions() const noexcept {
    return collisions_;
  }

  /// Number of tools offered.
  size_t size() const noexcept { return by_gateway_name_.size(); }

  /// The config check of (server, prefix) pairs: throws
  /// `std::invalid_argument` naming the server for an empty or duplicate
  /// server name or a malformed prefix, and naming both servers when two
  /// have the same prefix (empty included: then every tool both offer
  /// collides). NOTE: a prefix that begins another ("a_" and "a_b_") is
  /// accepted: only some names collide ("b_x" of the first, "x" of the
  /// second), and `set_tools` reports those.
  static void check_prefixes(
      const std::vector<std::pair<std::string, std::string>>& servers);

private:
  // -- member types -----------------------------------------------------------

  struct server_tools {
    std::string name;
    std::string prefix;
    /// The tools kept from its listing: well named, not duplicated.
    std::vector<tool_entry> tools;
  };

  struct location {
    size_t server;
    size_t tool;
  };

  // -- implementation ---------------------------------------------------------

  /// Assigns every gateway name again, servers in the order added.
  void rebuild();

  resolved_tool at(location loc) const;

  // -- member variables -------------------------------------------------------

  std::vector<server_tools> servers_;
  std::unordered_map<std::string, location> by_gateway_name_;
  std::vector<left_out_tool> collisions_;
};

/// Whether a client key whose allowed tools are `patterns` (exact names or
/// globs, as `policy::glob_match` reads them) may call `gateway_name`. An
/// empty list allows every tool.
bool tool_allowed(const std::vector<std::string>& patterns,
                  std::string_view gateway_name) noexcept;

} // namespace sluice::policy::mcp
