#pragma once

// The config file's sections, each read strictly over a `table_reader`
// (internal to `parse_config`). A section's values are checked by the
// library's own `validate` functions where the library has the rule; the
// reader adds only what is the file's (types, units, upper bounds, names
// that must exist) and names the key and line.

#include <string>

#include <toml++/toml.h>

#include "sluice/runtime/config/file_config.hpp"
#include "sluice/runtime/config/toml_reader.hpp"

namespace sluice::config {

/// `[node]`.
void read_node(table_reader& r, node_settings& n);

/// `[auth]` and its `[auth.keys.NAME]` tables.
void read_auth(table_reader& r, auth_settings& a);

/// A key's or a route's `tokens_per_minute`, `tokens_per_day`,
/// `budget_usd_per_day` and `budget_usd_per_month`.
void read_spend(table_reader& r, spend_settings& s);
/// `read_spend` and the scope's `model_limits` tables.
void read_spend_with_models(table_reader& r, spend_settings& s);

/// `[prices."MODEL"]` tables: `input`, `output`, `cached_input` dollars
/// per million tokens.
void read_prices(table_reader& r, const toml::table& t,
                 std::map<std::string, policy::model_price>& prices);

/// The rules between `[node]` and `[auth]`, once both are read:
/// `node.allowed_origins = ["*"]` needs client keys.
void check_browser_access(const node_settings& n);

/// `[backend]`: where scope progress lives (in process or in Redis), the
/// cluster cap and its leases.
void read_backend(table_reader& r, runtime_config& rc);

/// `[admission]`.
void read_admission(table_reader& r, admission_config& a);

/// `[kinds.NAME]`, over the defaults already in `p`.
void read_kind(table_reader& r, policy::call_policy& p);

/// A source's `breaker` and `aimd` tables (a `[sources.NAME]`'s or an
/// `[mcp.servers.NAME]`'s).
void read_breaker(table_reader& r, policy::breaker_config& b);
void read_aimd(table_reader& r, policy::aimd_config& a);
/// A `tls` table of an https:// upstream (an http source's, an MCP
/// server's): its files are checked as read.
void read_tls(table_reader& r, http_tls_config& tls);
/// `[mcp]` and its `[mcp.servers.NAME]` tables.
void read_mcp(table_reader& r, mcp_settings& m);
/// `[sources.NAME]`, simulated or HTTP, with its breaker, AIMD, quota,
/// model names, TLS and phases.
source_decl read_source(const std::string& name, const toml::table& t);

/// `[routes."PATH"]`; its kind and sources must be among `cfg`'s.
route_decl read_route(const std::string& path, const toml::table& t,
                      const file_config& cfg);

} // namespace sluice::config
