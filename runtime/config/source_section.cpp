// `[sources.NAME]` and the tables inside it.

#include <algorithm>
#include <limits>
#include <optional>

#include "sluice/actors/sim_answers.hpp"
#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/policy/model_match.hpp"

namespace sluice::config {

namespace {

policy::outcome_class read_class(table_reader& r, std::string_view key,
                                 policy::outcome_class dflt) {
  auto s = r.string(key);
  if (!s)
    return dflt;
  if (auto c = policy::parse_outcome_class(*s))
    return *c;
  r.fail(key, "must be \"success\", \"failure\" or \"ignored\"");
}

} // namespace

void read_breaker(table_reader& r, policy::breaker_config& b) {
  if (auto w = r.string("window")) {
    if (*w == "count")
      b.window = policy::breaker_config::window_kind::count;
    else if (*w == "time")
      b.window = policy::breaker_config::window_kind::time;
    else
      r.fail("window", "must be \"count\" or \"time\"");
  }
  using policy::breaker_config;
  read_fields(
      r, b,
      {count_field<&breaker_config::window_size>("window_size"),
       span_field<&breaker_config::window_span>("window_span_s"),
       count_field<&breaker_config::window_buckets>("window_buckets"),
       count_field<&breaker_config::min_samples>("min_samples"),
       number_field<&breaker_config::failure_rate_threshold>(
           "failure_rate_threshold"),
       span_field<&breaker_config::slow_call>("slow_call_s"),
       number_field<&breaker_config::slow_call_rate_threshold>(
           "slow_call_rate_threshold"),
       span_field<&breaker_config::open_duration>("open_duration_s"),
       number_field<&breaker_config::open_duration_growth>(
           "open_duration_growth"),
       span_field<&breaker_config::open_duration_max>("open_duration_max_s"),
       count_field<&breaker_config::half_open_probes>("half_open_probes"),
       flag_field<&breaker_config::open_on_retry_after>(
           "open_on_retry_after")});
  if (auto t = r.table("outcomes")) {
    table_reader o{*t, r.prefix() + ".outcomes"};
    auto& c = b.classes;
    c.rate_limited = read_class(o, "rate_limited", c.rate_limited);
    c.transient = read_class(o, "transient", c.transient);
    c.timeout = read_class(o, "timeout", c.timeout);
    c.permanent = read_class(o, "permanent", c.permanent);
    o.done();
  }
  r.done();
  r.checked([&] { validate(b); });
}

void read_aimd(table_reader& r, policy::aimd_config& a) {
  using policy::aimd_config;
  read_fields(r, a,
              {count_field<&aimd_config::initial>("initial"),
               count_field<&aimd_config::min>("min"),
               count_field<&aimd_config::max>("max"),
               count_field<&aimd_config::increase>("increase"),
               number_field<&aimd_config::decrease_ratio>("decrease_ratio"),
               flag_field<&aimd_config::slow_start>("slow_start")});
  r.done();
  r.checked([&] { validate(a); });
}

// `[sources.NAME.tls]` of an https:// source. The files are checked here,
// so a bad one is named with its key and line (the source's own check
// repeats it for services that build the config in code).
void read_tls(table_reader& r, http_tls_config& tls) {
  read_fields(r, tls,
              {text_field<&http_tls_config::ca_file>("ca_file"),
               text_field<&http_tls_config::client_cert>("client_cert"),
               text_field<&http_tls_config::client_key>("client_key"),
               text_field<&http_tls_config::server_name>("server_name"),
               flag_field<&http_tls_config::verify>("verify")});
  r.done();
  r.checked([&] { validate(tls); });
}

namespace {

void read_quota(table_reader& r, policy::quota_config& q) {
  if (auto x = r.number("rate_per_s")) {
    if (!(*x <= rate_limit_per_s))
      r.fail("rate_per_s", "must be at most 1e9");
    q.rate_per_s = *x;
  }
  if (auto x = r.count("burst"))
    q.burst = *x;
  r.done();
  r.checked([&] { validate(q); });
}

void read_phase(table_reader& r, sim_phase& p) {
  read_fields(r, p,
              {span_field<&sim_phase::length>("length_s"),
               span_field<&sim_phase::latency_min>("latency_min_ms"),
               span_field<&sim_phase::latency_max>("latency_max_ms"),
               number_field<&sim_phase::transient_rate>("transient_rate"),
               number_field<&sim_phase::rate_limit_rate>("rate_limit_rate"),
               number_field<&sim_phase::permanent_rate>("permanent_rate"),
               number_field<&sim_phase::hang_rate>("hang_rate"),
               number_field<&sim_phase::stream_break_rate>("stream_break_rate"),
               span_field<&sim_phase::retry_after>("retry_after_s")});
  if (p.latency_max < p.latency_min && !r.get("latency_max_ms"))
    p.latency_max = p.latency_min; // only the minimum given
  r.done();
}

// `[sources.NAME.statuses]` of an http source: statuses moved to another
// outcome class, checked as read so an error names the element's line.
void read_statuses(table_reader& r, policy::status_rules& rules) {
  using policy::outcome_kind;
  for (auto [key, kind] :
       {std::pair{"transient", outcome_kind::transient},
        std::pair{"rate_limited", outcome_kind::rate_limited},
        std::pair{"permanent", outcome_kind::permanent}}) {
    auto list = r.array(key);
    if (list == nullptr)
      continue;
    for (auto& n : *list) {
      if (!n.is_integer())
        r.fail(key, "must be an array of HTTP statuses (integers)", &n);
      // Clamped, not cast: a huge integer must not wrap into [300, 599].
      // `set` says what is wrong with it (the one place of the rule).
      auto status = std::clamp<int64_t>(*n.value<int64_t>(),
                                        std::numeric_limits<int>::min(),
                                        std::numeric_limits<int>::max());
      try {
        rules.set(static_cast<int>(status), kind);
      } catch (const field_error& e) {
        r.fail(key, e.problem(), &n);
      }
    }
  }
  if (auto x = r.boolean("empty_2xx_transient"))
    rules.empty_2xx_transient = *x;
  r.done();
}

} // namespace

source_decl read_source(const std::string& name, const toml::table& t) {
  table_reader r{t, "sources." + name};
  source_decl d;
  d.name = name;
  d.line = r.line();
  auto type = r.string("type");
  if (!type)
    r.fail("type", "missing; must be \"simulated\", \"http\" or "
                   "\"remote\"");
  if (*type != "simulated" && *type != "http" && *type != "remote")
    r.fail("type", "unknown source type '" + *type +
                       "' (supported: \"simulated\", \"http\", "
                       "\"remote\")");
  d.type = *type;
  if (auto b = r.table("breaker")) {
    table_reader br{*b, r.prefix() + ".breaker"};
    read_breaker(br, d.settings.breaker);
  }
  if (auto a = r.table("aimd")) {
    table_reader ar{*a, r.prefix() + ".aimd"};
    read_aimd(ar, d.settings.aimd);
  }
  if (auto q = r.table("quota")) {
    table_reader qr{*q, r.prefix() + ".quota"};
    d.settings.quota.emplace();
    read_quota(qr, *d.settings.quota);
  }
  if (auto m = r.table("models")) {
    // "the model clients name" = "this upstream's name for it"
    table_reader mr{*m, r.prefix() + ".models"};
    for (auto&& [k, v] : *m) {
      std::string name{k.str()};
      auto upstream = mr.string(name);
      auto fits = [](const std::string& n) {
        return !n.empty() && n.size() <= policy::max_model_name_bytes &&
               std::none_of(n.begin(), n.end(), [](char c) {
                 auto u = static_cast<unsigned char>(c);
                 return u < 0x20 || u == 0x7f;
               });
      };
      if (!fits(name) || !fits(*upstream))
        mr.fail(name, "model names are 1 to " +
                          std::to_string(policy::max_model_name_bytes) +
                          " bytes, no control characters");
      d.settings.model_names[name] = *upstream;
    }
    mr.done();
  }
  read_fields(r, d.settings,
              {flag_field<&source_settings::obey_rate_limit_headers>(
                  "obey_rate_limit_headers")});
  if (d.type == "remote") {
    auto address = r.string("address");
    if (!address)
      r.fail("address", "missing; the HOST:PORT a remote source is served "
                        "on, e.g. \"127.0.0.1:7300\"");
    try {
      auto hp = parse_host_port(*address, {std::nullopt, 1});
      d.remote.host = std::move(hp.host);
      d.remote.port = hp.port;
    } catch (const std::invalid_argument& e) {
      r.fail("address", std::string{e.what()} +
                            " (HOST:PORT or [V6]:PORT, e.g. "
                            "\"127.0.0.1:7300\")");
    }
    read_fields(
        r, d.remote,
        {span_field<&remote_source_config::connect_timeout>(
             "connect_timeout_s"),
         span_field<&remote_source_config::reconnect_max>("reconnect_max_s")});
    // Mutual TLS only: no plaintext mode to fall back to (validate refuses
    // a missing file).
    std::optional<table_reader> tr;
    if (auto tls = r.table("tls")) {
      tr.emplace(*tls, r.prefix() + ".tls");
      read_fields(*tr, d.remote.tls,
                  {text_field<&remote_tls_config::ca_file>("ca_file"),
                   text_field<&remote_tls_config::cert_file>("cert_file"),
                   text_field<&remote_tls_config::key_file>("key_file"),
                   text_field<&remote_tls_config::server_name>("server_name")});
      tr->done();
    }
    r.done();
    std::optional<std::string> problem;
    try {
      validate(d.remote);
    } catch (const std::invalid_argument& e) {
      problem = e.what();
    }
    if (problem && problem->compare(0, 4, "tls.") == 0) {
      if (!tr)
        r.fail("tls", "missing; a remote source is reached over mutual TLS "
                      "only: [sources." +
                          name + ".tls] with ca_file, cert_file, key_file");
      tr->checked([&] { throw std::invalid_argument(problem->substr(4)); });
    }
    if (problem)
      r.checked([&] { throw std::invalid_argument(*problem); });
    return d;
  }
  if (d.type == "http") {
    auto url = r.string("base_url");
    if (!url)
      r.fail("base_url", "missing; e.g. \"http://127.0.0.1:9000\"");
    d.http.base_url = *url;
    if (auto h = r.table("headers")) {
      table_reader hr{*h, r.prefix() + ".headers"};
      for (auto&& [k, v] : *h) {
        std::string name{k.str()};
        auto value = hr.string(name);
        d.http.headers.emplace_back(name, *value);
      }
      hr.done();
    }
    if (auto st = r.table("statuses")) {
      table_reader sr{*st, r.prefix() + ".statuses"};
      read_statuses(sr, d.http.statuses);
    }
    // On an http:// URL the source's own check refuses the table (below).
    if (auto tls = r.table("tls")) {
      table_reader tr{*tls, r.prefix() + ".tls"};
      read_tls(tr, d.http.tls.emplace());
    }
    using cfg = http_source_config;
    read_fields(
        r, d.http,
        {span_field<&cfg::connect_timeout>("connect_timeout_s"),
         span_field<&cfg::first_byte_timeout>("first_byte_timeout_s"),
         span_field<&cfg::idle_timeout>("idle_timeout_s"),
         span_field<&cfg::response_timeout>("response_timeout_s"),
         count_field<&cfg::max_idle_connections, idle_connections_limit>(
             "max_idle_connections")});
    if (auto x = r.integer("max_body_bytes")) {
      if (*x < 1 || *x > max_body_bytes_limit)
        r.fail("max_body_bytes", "must be in [1, 1073741824] (1 GiB)");
      d.http.max_body_bytes = static_cast<uint64_t>(*x);
    }
    if (auto x = r.integer("max_error_body_bytes")) {
      if (*x < 1 || *x > max_body_bytes_limit)
        r.fail("max_error_body_bytes", "must be in [1, 1073741824] (1 GiB)");
      d.http.max_error_body_bytes = static_cast<uint64_t>(*x);
    }
    r.done();
    r.checked([&] { validate(d.http); });
    return d;
  }
  if (auto x = r.integer("seed"))
    d.sim.seed = static_cast<uint64_t>(*x);
  if (auto x = r.boolean("repeat"))
    d.sim.repeat = *x;
  if (auto x = r.string("body"))
    d.sim.body = *x;
  if (auto x = r.count("embedding_dimensions", sim::max_embedding_dimensions))
    d.sim.embedding_dimensions = static_cast<uint32_t>(*x);
  if (auto phases = r.array("phases")) {
    d.sim.phases.clear();
    size_t i = 0;
    for (auto& n : *phases) {
      auto key = "phases[" + std::to_string(i++) + "]";
      if (!n.is_table())
        r.fail(key, "must be a table", &n);
      table_reader pr{*n.as_table(), r.prefix() + "." + key};
      d.sim.phases.emplace_back();
      read_phase(pr, d.sim.phases.back());
    }
  }
  r.done();
  r.checked([&] { validate(d.sim); });
  return d;
}

} // namespace sluice::config
