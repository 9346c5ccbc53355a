#include "sluice/runtime/config_file.hpp"

#include <fstream>

#include <toml++/toml.h>

#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/config/toml_reader.hpp"
#include "sluice/runtime/config_error.hpp"

// The sections' readers are in runtime/config/; the default config is
// runtime/config/default_config.toml (runtime/config/default_config.cpp).

namespace sluice {

using config::table_reader;

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
    config::read_node(r, cfg.node);
  }
  if (auto t = top.table("auth")) {
    table_reader r{*t, "auth"};
    config::read_auth(r, cfg.node.auth);
  }
  if (auto t = top.table("admission")) {
    table_reader r{*t, "admission"};
    config::read_admission(r, cfg.runtime.admission);
  }
  if (auto t = top.table("backend")) {
    table_reader r{*t, "backend"};
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
  if (auto x = top.integer("seed"))
    cfg.runtime.seed = static_cast<uint64_t>(*x);
  if (auto t = top.table("sources")) {
    table_reader sources{*t, "sources"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      cfg.sources.push_back(config::read_source(name, *sources.table(name)));
    }
    sources.done();
  }
  if (auto t = top.table("routes")) {
    table_reader routes{*t, "routes"};
    for (auto&& [k, v] : *t) {
      std::string path{k.str()};
      cfg.routes.push_back(config::read_route(path, *routes.table(path), cfg));
    }
    routes.done();
  }
  top.done();
  if (cfg.routes.empty())
    throw config_error("routes", "needs at least one route", 0);
  return cfg;
}

file_config load_config_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw config_error("file", "cannot read '" + path + "'");
  std::string text(static_cast<size_t>(config::config_file_limit) + 1, '\0');
  in.read(text.data(), config::config_file_limit + 1);
  if (in.bad())
    throw config_error("file", "cannot read '" + path + "'");
  if (in.gcount() > config::config_file_limit)
    throw config_error("file", "'" + path + "' is larger than 16 MiB");
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_config(text, path);
}

void install(runtime& rt, const file_config& cfg) {
  for (auto& s : cfg.sources) {
    if (s.type == "http")
      rt.add_http_source(s.name, s.http, s.settings);
    else if (s.type == "remote")
      rt.add_remote_source(s.name, s.remote, s.settings);
    else
      rt.add_simulated_source(s.name, s.sim, s.settings);
  }
  for (auto& r : cfg.routes)
    rt.add_route(r.route);
}

} // namespace sluice
