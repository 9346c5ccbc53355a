// `[routes."PATH"]`.

#include <algorithm>

#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/policy/breaker/ejection.hpp"
#include "sluice/runtime/policy/model_match.hpp"
#include "sluice/runtime/route_rules.hpp"

namespace sluice::config {

route_decl read_route(const std::string& path, const toml::table& t,
                      const file_config& cfg) {
  table_reader r{t, "routes.\"" + path + "\""};
  route_decl d;
  d.line = r.line();
  d.route.name = path;
  if (path.empty() || path[0] != '/')
    throw config_error(r.prefix(), "a route is a path starting with '/'",
                       d.line);
  // The node's own endpoints would shadow the route.
  for (std::string_view own :
       {"/healthz", "/status", "/metrics", "/events", "/v1/models"})
    if (path == own ||
        (own == "/v1/models" && path.rfind("/v1/models/", 0) == 0))
      throw config_error(r.prefix(),
                         "'" + path + "' is the node's own endpoint", d.line);
  if (auto k = r.string("kind"))
    d.route.kind = *k;
  auto is_kind = [&](const std::string& k) {
    return cfg.runtime.kinds.count(k) != 0;
  };
  auto is_source = [&](const std::string& name) {
    return std::any_of(cfg.sources.begin(), cfg.sources.end(),
                       [&](const source_decl& s) { return s.name == name; });
  };
  // A list of source names and optional weights, read as TOML here, then
  // checked by the route rules (`validate_sources`) for the key as written:
  // `key` (the list's own key, for a model given as a bare list) or
  // `sources` and `weights`.
  auto read_weights = [](table_reader& in, const toml::array* weights,
                         std::vector<double>& ws) {
    if (weights != nullptr)
      for (auto& n : *weights) {
        if (!n.is_number())
          in.fail("weights", "must be positive numbers, at most 1e6", &n);
        ws.push_back(*n.value<double>());
      }
  };
  auto read_sources = [&](table_reader& in, const std::string& key,
                          const toml::array& list, const toml::array* weights,
                          std::vector<std::string>& names,
                          std::vector<double>& ws) {
    for (auto& n : list) {
      if (!n.is_string())
        in.fail(key, "must be an array of source names", &n);
      names.push_back(*n.value<std::string>());
    }
    read_weights(in, weights, ws);
    in.checked([&] { validate_sources(names, ws, is_source); },
               {{"sources", key}});
  };
  auto sources = r.array("sources");
  auto models = r.table("models");
  if (sources)
    read_sources(r, "sources", *sources, r.array("weights"), d.route.sources,
                 d.route.weights);
  else
    read_weights(r, r.array("weights"), d.route.weights);
  if (models) {
    // "NAME" = ["source", ...]  or  "NAME" = { sources = [...], weights }
    table_reader mr{*models, r.prefix() + ".models"};
    policy::model_rules patterns; // checked here for the line number
    for (auto&& [k, v] : *models) {
      model_route m;
      m.pattern = std::string{k.str()};
      try {
        patterns.add(m.pattern, 0);
      } catch (const std::invalid_argument& e) {
        mr.fail(m.pattern, e.what(), &v);
      }
      if (v.is_array()) {
        read_sources(mr, m.pattern, *mr.array(m.pattern), nullptr, m.sources,
                     m.weights);
      } else if (v.is_table()) {
        table_reader tr{*mr.table(m.pattern),
                        mr.prefix() + ".\"" + m.pattern + "\""};
        auto list = tr.array("sources");
        if (!list)
          tr.fail("sources", "missing; the sources for this model");
        read_sources(tr, "sources", *list, tr.array("weights"), m.sources,
                     m.weights);
        tr.done();
      } else {
        mr.fail(m.pattern,
                "must be an array of source names or a table with sources", &v);
      }
      d.route.models.push_back(std::move(m));
    }
    mr.done();
  }
  if (auto s = r.string("scope"))
    d.route.scope = *s;
  if (auto x = r.number("max_ejection_percent")) {
    d.route.max_ejection_percent = *x;
    r.checked([&] { policy::validate_max_ejection_percent(*x); });
  }
  if (auto b = r.table("retry_budget")) {
    table_reader br{*b, r.prefix() + ".retry_budget"};
    auto& cfg = d.route.retry_budget.emplace();
    if (auto x = br.number("percent"))
      cfg.percent = *x;
    if (auto x = br.count("min_concurrency"))
      cfg.min_concurrency = *x;
    if (auto w = br.string("when_spent")) {
      if (*w == "wait")
        cfg.when_spent = policy::when_budget_spent::wait;
      else if (*w == "fail")
        cfg.when_spent = policy::when_budget_spent::fail;
      else
        br.fail("when_spent", "must be \"wait\" or \"fail\"");
    }
    br.done();
    br.checked([&] { validate(cfg); });
  }
  read_spend_with_models(r, d.spend);
  r.done();
  // What the lists alone do not show: the kind, and a route with neither
  // sources nor models.
  r.checked([&] { validate(d.route, is_kind, is_source); });
  return d;
}

} // namespace sluice::config
