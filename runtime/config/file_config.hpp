#pragma once

// What a config file holds, once parsed and checked: the settings types
// the section readers (config/sections.hpp) fill and `install` applies.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/actors/http_source.hpp"
#include "sluice/actors/simulated_source.hpp"
#include "sluice/runtime/config/secret.hpp"
#include "sluice/runtime/policy/config_diff.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/policy/mcp/server_settings.hpp"
#include "sluice/runtime/policy/route_config.hpp"
#include "sluice/runtime/policy/source/source_settings.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"
#include "sluice/runtime/remote_source.hpp"
#include "sluice/runtime/runtime_config.hpp"

namespace sluice {

/// Limits on what calls use and cost in one scope (SPEC §12): a client
/// key's (`[auth.keys.NAME]`, all its calls) or a route's
/// (`[routes."PATH"]`, every client's calls on it). A limit not set is 0:
/// none (the config refuses a 0 written out).
struct model_spend;

struct spend_settings {
  /// Tokens (prompt + completion) per sliding minute and day.
  uint64_t tokens_per_minute = 0;
  uint64_t tokens_per_day = 0;
  /// Dollars per calendar day and month, UTC, at `[prices]`.
  double budget_usd_per_day = 0;
  double budget_usd_per_month = 0;

  /// `model_limits`: limits on the calls of some models within this scope,
  /// each call under the most specific pattern its model matches (a name
  /// before any glob, then the glob with the most literal bytes, as a
  /// route's models). Only in a key's or a route's own settings.
  std::vector<model_spend> models;

  /// Limits of its own.
  bool any() const noexcept {
    return tokens_per_minute != 0 || tokens_per_day != 0 ||
           budget_usd_per_day != 0 || budget_usd_per_month != 0;
  }
  /// Limits of its own or on some models.
  bool applies() const noexcept { return any() || !models.empty(); }
  bool has_budget() const noexcept {
    return budget_usd_per_day != 0 || budget_usd_per_month != 0;
  }
  bool operator==(const spend_settings& o) const noexcept;
};

/// One `model_limits."PATTERN"` table: the limits of the calls whose model
/// matches PATTERN (a name or a glob, as in a key's `models`).
struct model_spend {
  std::string pattern;
  spend_settings spend;
  int line = 0;

  bool operator==(const model_spend& o) const noexcept {
    return pattern == o.pattern && spend == o.spend;
  }
};

inline bool spend_settings::operator==(const spend_settings& o) const noexcept {
  return tokens_per_minute == o.tokens_per_minute &&
         tokens_per_day == o.tokens_per_day &&
         budget_usd_per_day == o.budget_usd_per_day &&
         budget_usd_per_month == o.budget_usd_per_month && models == o.models;
}

/// What the node counts calls' use and cost by.
struct spend_rules {
  /// `[prices."MODEL"]`, by the model name clients send.
  std::map<std::string, policy::model_price> prices;
  /// Route path -> its limits (only routes that set some).
  std::map<std::string, spend_settings> routes;
  /// `node.default_max_tokens`: the completion tokens a call reserves
  /// when its request sets neither `max_tokens` nor
  /// `max_completion_tokens`.
  uint64_t default_max_tokens = 1024;
};

/// One `[auth.keys.NAME]` table: a client key and what it may do.
struct client_key_config {
  /// The key's name (in logs, /status and metrics; never the key itself).
  std::string name;
  /// SHA-256 of the key: the key itself is not kept.
  sha256_digest digest{};
  /// Model names or globs ("gpt-4o*") the key may use; "*": any.
  std::vector<std::string> models{"*"};
  /// MCP tools (gateway names, or globs: "github_*") the key may list and
  /// call; "*": any. An empty list: none.
  std::vector<std::string> tools{"*"};
  /// Calls in flight at once with this key: the cap of its session tier
  /// (its X-Session-Id sub-sessions share it, each also capped by
  /// `admission.session_cap`).
  uint32_t max_concurrent = 64;
  /// Requests per minute (0: no limit), in bursts of up to `burst` (0:
  /// `requests_per_minute`). Over it: 429 rate_limit_exceeded.
  uint32_t requests_per_minute = 0;
  uint32_t burst = 0;
  /// Its tokens and budgets.
  spend_settings spend;
  int line = 0;
};

/// `[auth]`: who may call the node, and who may operate it.
struct auth_settings {
  /// No keys: anonymous clients, allowed only on a loopback listener unless
  /// `allow_anonymous`.
  std::vector<client_key_config> keys;
  bool allow_anonymous = false;
  /// SHA-256 of the admin key (`auth.admin_key`): with it, the operations
  /// endpoints (/status, /metrics, /events, /admin/...) on the main
  /// listener need `Authorization: Bearer ADMIN_KEY`.
  std::optional<sha256_digest> admin_digest;
};

/// Settings of the `sluice-node` process itself (`[node]`).
struct node_settings {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;
  /// Largest request body accepted (413 beyond).
  uint64_t max_body_bytes = 1 << 20;
  /// How long in-flight calls may take to finish on SIGINT / SIGTERM.
  duration shutdown_grace = std::chrono::seconds{10};
  /// Where actors and connections run. "loops" (the default): `loops`
  /// event loops, each one thread running its connections, the actors
  /// their requests wake and the upstream connections of their calls
  /// (actors/loops/loop_scheduler.hpp; SPEC §9). "sharing" or "stealing": CAF's
  /// scheduler with that policy on `actor_threads` workers, and the HTTP
  /// front on two threads of its own (each request then crosses threads).
  std::string scheduler = "loops";
  /// With "loops": how many; 0: one per core.
  uint32_t loops = 0;
  /// With more than one loop, how connections reach them. "reuseport" (the
  /// default): each loop has its own listening socket on the address
  /// (SO_REUSEPORT) and the kernel spreads new connections over them, so a
  /// connection is accepted on the loop it lives on. "handoff": one
  /// listener, on the first loop, hands them to the loops in turn (a post
  /// to another thread per connection).
  std::string accept = "reuseport";
  /// With "sharing" or "stealing": CAF worker threads; 0: half the cores,
  /// at least one (the other half runs the HTTP threads). On 2 cores one
  /// worker measured 30-35k req/s against 28-33k for two and 24k for CAF's
  /// own default of four (bench/RESULTS.md).
  uint32_t actor_threads = 0;
  /// Client connections open at once; beyond, a new one is closed at once.
  /// Each costs a descriptor and ~1 KiB at rest (more while a request is
  /// read: up to its header and body limits).
  uint32_t max_connections = 10000;
  /// `GET /events` subscribers at once (503 `overloaded` beyond); each may
  /// hold up to 256 KiB of queued events.
  uint32_t max_event_subscribers = 256;
  /// Interval of the `: ping` comment sent to every `/events` subscriber
  /// (keeps proxies from timing the stream out, and finds dead clients).
  duration events_ping = std::chrono::seconds{10};
  /// `node.admin_listen`: a second listener serving only the operations
  /// endpoints (and /healthz), without the admin key; bind it to loopback or
  /// a private network. Empty: none.
  std::optional<host_port> admin_listen;
  /// From `[mcp]` (`mcp_settings`): MCP sessions kept at once, and how long
  /// an unused one lives.
  uint32_t mcp_max_sessions = 10000;
  duration mcp_session_idle = std::chrono::hours{1};
  /// `node.allowed_hosts`: names (lowercase, no port) a `Host` header may
  /// carry on a request served without a key, besides IP addresses and
  /// `localhost` (a name not listed may be a DNS-rebound page's).
  std::vector<std::string> allowed_hosts;
  /// `node.allowed_origins`: web origins (`normal_origin`) whose pages may
  /// call the node from a browser; "*": any, for requests with a client
  /// key (needs `auth.keys`). Its line, for that check.
  std::vector<std::string> allowed_origins;
  int allowed_origins_line = 0;
  /// `node.admin_max_connections`: connections open at once on the admin
  /// listener (not counted in `max_connections`: a client flood cannot lock
  /// the operator out); at the cap the longest idle one makes room.
  uint32_t admin_max_connections = 64;
  /// `node.admin_idle_timeout_s`: how long an admin connection may wait
  /// for (or send) a request, shorter than the main listener's 60 s: an
  /// operator's tool asks at once, and idle clients must not hold the
  /// admin listener's few slots.
  duration admin_idle_timeout = std::chrono::seconds{5};
  /// `node.access_log`: one JSON line per request to "stdout", to a file
  /// (a path), or "off".
  std::string access_log = "stdout";
  /// `[auth]`.
  auth_settings auth;
  /// `[prices]`, the routes' limits and `default_max_tokens`.
  spend_rules spend;
  /// The lines of the keys above that the start's own rules may refuse
  /// (`listen`, `admin_listen`, `access_log`; missing: not in the file).
  std::map<std::string, int> key_lines;
};

/// One `[sources.NAME]` table.
struct source_decl {
  std::string name;
  /// "simulated", "http" or "remote".
  std::string type;
  source_settings settings;
  /// For type "simulated".
  sim_config sim;
  /// For type "http".
  http_source_config http;
  /// For type "remote".
  remote_source_config remote;
  int line = 0;
  /// Changes whenever the definition does, in two parts
  /// (policy/config_diff.hpp): `upstream`, its table as TOML without the
  /// tables below and the content of the TLS files it names -- a reload
  /// replaces a source whose upstream part changed --; `tuning`, its
  /// `breaker`, `aimd`, `quota` and `models` tables, which a reload
  /// changes in place.
  policy::source_print fingerprint;
};

/// One `[routes."PATH"]` table.
struct route_decl {
  route_config route;
  /// Its tokens and budgets (the node's: the route's runtime settings do
  /// not hold them).
  spend_settings spend;
  int line = 0;
  /// Its table as TOML and its kind's (see `source_decl::fingerprint`).
  std::string fingerprint;
};

/// `[mcp]`: the node as an MCP server in front of MCP servers (SPEC §13).
struct mcp_settings {
  /// `[mcp.servers.NAME]`, in the file's order (TOML tables: sorted by
  /// name). None: no /mcp endpoint.
  std::vector<mcp_server_settings> servers;
  /// Each server's breaker, AIMD and quota (`[mcp.servers.NAME.breaker]`,
  /// ...), by index into `servers`.
  std::vector<source_settings> settings;
  /// Each server's table as TOML (a reload starts a server whose table
  /// changed again), by index into `servers`; and the kind's name and
  /// table (a change builds the routes again, keeping the servers).
  std::vector<std::string> prints;
  std::string route_print;
  /// The call kind of tool calls (`[kinds.NAME]`; default "tool").
  std::string kind = "tool";
  /// MCP sessions kept at once; past it, the one idle longest is ended.
  uint32_t max_sessions = 10000;
  /// A session unused this long is ended (its client gets 404 and
  /// initializes again, as MCP says).
  duration session_idle = std::chrono::hours{1};
};

/// A whole config file, parsed and checked.
struct file_config {
  node_settings node;
  runtime_config runtime;
  std::vector<source_decl> sources;
  std::vector<route_decl> routes;
  mcp_settings mcp;
  /// The parts a reload cannot change in a running node -- "node",
  /// "admission", "backend", "seed" -- each as its TOML text (empty: not in
  /// the file), so a reload can say which changes wait for a restart.
  std::map<std::string, std::string> fixed_parts;
};

} // namespace sluice
