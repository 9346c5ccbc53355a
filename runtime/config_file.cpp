#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/runtime.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "sluice/runtime/config/file_snapshot.hpp"
#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/config/toml_reader.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/model_match.hpp"

// The sections' readers are in runtime/config/; the default config is
// runtime/config/default_config.toml (runtime/config/default_config.cpp).

namespace sluice {

using config::table_reader;

namespace {

// A table as TOML text: tables print their keys in order, so the same
// definition prints the same whatever its layout or position in the file.
std::string as_text(const toml::table& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

// What a file holds now, for a fingerprint (a renewed certificate under the
// same path is a changed source). Read as the config is: a FIFO named as
// a TLS file must not hang a reload (the source's own check refuses it).
std::string file_print(const std::string& path) {
  if (path.empty())
    return "-";
  try {
    auto d = sha256(config::read_file_snapshot(
        path, static_cast<size_t>(config::config_file_limit)));
    return std::string{d.begin(), d.end()};
  } catch (const std::invalid_argument&) {
    return "unreadable";
  }
}

// The tables of a source a reload can change in place.
constexpr std::string_view tuning_tables[] = {"breaker", "aimd", "quota",
                                              "models"};

policy::source_print source_print(const toml::table& t, const source_decl& d) {
  policy::source_print out;
  auto upstream = t;
  for (auto key : tuning_tables) {
    upstream.erase(key);
    if (auto* sub = t.get_as<toml::table>(key))
      out.tuning += std::string{key} + as_text(*sub) + "\n";
  }
  out.upstream = as_text(upstream);
  if (d.type == "http" && d.http.tls)
    out.upstream += "\n#tls " + file_print(d.http.tls->ca_file) + " " +
                    file_print(d.http.tls->client_cert) + " " +
                    file_print(d.http.tls->client_key);
  if (d.type == "remote")
    out.upstream += "\n#tls " + file_print(d.remote.tls.ca_file) + " " +
                    file_print(d.remote.tls.cert_file) + " " +
                    file_print(d.remote.tls.key_file);
  return out;
}

// A price for a model no route serves is a typo: refused with its line.
void check_priced_models(const file_config& cfg, const toml::table& prices) {
  for (auto&& [k, v] : prices) {
    std::string model{k.str()};
    bool served = false;
    for (auto& r : cfg.routes) {
      policy::model_rules rules;
      size_t i = 0;
      for (auto& e : r.route.models)
        rules.add(e.pattern, i++);
      if (r.route.models.empty() || rules.match(model) ||
          !r.route.sources.empty()) {
        served = true;
        break;
      }
    }
    if (!served)
      throw config_error("prices.\"" + model + "\"",
                         "no route serves this model (a route's models, or "
                         "its default sources)",
                         config::line_of(v));
  }
}

// The key a budget is set by, for a refusal that names it.
const char* budget_key(const spend_settings& s) {
  return s.budget_usd_per_day != 0 ? "budget_usd_per_day"
                                   : "budget_usd_per_month";
}

// A budget counts money: every model its calls may use needs a price.
// A route's or a key's budget with no price at all would count nothing.
void check_budgets_priced(const file_config& cfg) {
  if (!cfg.node.spend.prices.empty())
    return;
  // The scope's own budget, else its first model's with one.
  auto check = [](const std::string& prefix, const spend_settings& s,
                  int line) {
    if (s.has_budget())
      throw config_error(prefix + budget_key(s),
                         "a budget needs [prices] for the models it pays "
                         "for",
                         line);
    for (auto& m : s.models)
      if (m.spend.has_budget())
        throw config_error(prefix + "model_limits.\"" + m.pattern + "\"." +
                               budget_key(m.spend),
                           "a budget needs [prices] for the models it pays "
                           "for",
                           m.line);
  };
  for (auto& k : cfg.node.auth.keys)
    check("auth.keys." + k.name + ".", k.spend, k.line);
  for (auto& r : cfg.routes)
    check("routes.\"" + r.route.name + "\".", r.spend, r.line);
}

} // namespace

file_config parse_config(std::string_view text, std::string_view origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw config_error("(syntax)", std::string{e.description()},
                       static_cast<int>(e.source().begin.line));
  }
  file_config cfg;
  table_reader top{root, ""};
  if (auto t = top.table("node")) {
    table_reader r{*t, "node"};
    cfg.fixed_parts["node"] = as_text(*t);
    config::read_node(r, cfg.node);
  }
  if (auto t = top.table("auth")) {
    table_reader r{*t, "auth"};
    config::read_auth(r, cfg.node.auth);
  }
  config::check_browser_access(cfg.node);
  if (auto t = top.table("admission")) {
    table_reader r{*t, "admission"};
    cfg.fixed_parts["admission"] = as_text(*t);
    config::read_admission(r, cfg.runtime.admission);
  }
  if (auto t = top.table("backend")) {
    table_reader r{*t, "backend"};
    cfg.fixed_parts["backend"] = as_text(*t);
    config::read_backend(r, cfg.runtime);
  }
  if (auto t = top.table("kinds")) {
    table_reader kinds{*t, "kinds"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      auto kt = kinds.table(name);
      table_reader r{*kt, "kinds." + name};
      auto& p = cfg.runtime.kinds[name]; // defaults for chat / embeddings
      config::read_kind(r, p);
    }
    kinds.done();
  }
  if (auto x = top.integer("seed")) {
    cfg.runtime.seed = static_cast<uint64_t>(*x);
    cfg.fixed_parts["seed"] = std::to_string(*x);
  }
  if (auto t = top.table("sources")) {
    table_reader sources{*t, "sources"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      auto* st = sources.table(name);
      cfg.sources.push_back(config::read_source(name, *st));
      cfg.sources.back().fingerprint = source_print(*st, cfg.sources.back());
    }
    sources.done();
  }
  if (auto t = top.table("routes")) {
    table_reader routes{*t, "routes"};
    for (auto&& [k, v] : *t) {
      std::string path{k.str()};
      auto* rt = routes.table(path);
      cfg.routes.push_back(config::read_route(path, *rt, cfg));
      auto& d = cfg.routes.back();
      if (d.spend.applies())
        cfg.node.spend.routes[path] = d.spend;
      // Its kind's policy as read (a [kinds] table, or the defaults). Its
      // tokens and budgets are the node's, not the route's: a change of
      // them does not build the route again.
      toml::table runtime_part = *rt;
      for (auto key :
           {"tokens_per_minute", "tokens_per_day", "budget_usd_per_day",
            "budget_usd_per_month", "model_limits"})
        runtime_part.erase(key);
      d.fingerprint = as_text(runtime_part) + "\n#kind ";
      if (auto* kinds = root.get_as<toml::table>("kinds"))
        if (auto* k = kinds->get_as<toml::table>(d.route.kind))
          d.fingerprint += as_text(*k);
    }
    routes.done();
  }
  if (auto t = top.table("mcp")) {
    table_reader r{*t, "mcp"};
    config::read_mcp(r, cfg.mcp);
    // What a reload compares: each server's table (a change starts it
    // again), and the kind of their routes.
    auto* servers = t->get_as<toml::table>("servers");
    for (auto& m : cfg.mcp.servers)
      cfg.mcp.prints.push_back(
          as_text(*servers->get_as<toml::table>(m.name)));
    cfg.mcp.route_print = cfg.mcp.kind;
    if (auto* kinds = root.get_as<toml::table>("kinds"))
      if (auto* k = kinds->get_as<toml::table>(cfg.mcp.kind))
        cfg.mcp.route_print += "\n" + as_text(*k);
    cfg.node.mcp_max_sessions = cfg.mcp.max_sessions;
    cfg.node.mcp_session_idle = cfg.mcp.session_idle;
    if (!cfg.mcp.servers.empty() && cfg.runtime.kinds.count(cfg.mcp.kind) == 0)
      throw config_error("mcp.kind", "no call kind '" + cfg.mcp.kind + "'",
                         r.line());
  }
  if (auto t = top.table("prices")) {
    table_reader prices{*t, "prices"};
    config::read_prices(prices, *t, cfg.node.spend.prices);
    check_priced_models(cfg, *t);
  }
  top.done();
  if (cfg.routes.empty() && cfg.mcp.servers.empty())
    throw config_error("routes", "needs at least one route (or an MCP server)", 0);
  check_budgets_priced(cfg);
  return cfg;
}

file_config load_config_file(const std::string& path) {
  std::string text;
  try {
    text = config::read_file_snapshot(
        path, static_cast<size_t>(config::config_file_limit));
  } catch (const std::invalid_argument& e) {
    throw config_error("file", e.what());
  }
  return parse_config(text, path);
}

void add_declared_source(runtime& rt, const source_decl& s) {
  if (s.type == "http")
    rt.add_http_source(s.name, s.http, s.settings);
  else if (s.type == "remote")
    rt.add_remote_source(s.name, s.remote, s.settings);
  else
    rt.add_simulated_source(s.name, s.sim, s.settings);
}

void install(runtime& rt, const file_config& cfg) {
  for (auto& s : cfg.sources)
    add_declared_source(rt, s);
  for (auto& r : cfg.routes)
    rt.add_route(r.route);
  for (size_t i = 0; i < cfg.mcp.servers.size(); ++i)
    rt.add_mcp_server(cfg.mcp.servers[i], cfg.mcp.settings[i], cfg.mcp.kind);
}

} // namespace sluice
