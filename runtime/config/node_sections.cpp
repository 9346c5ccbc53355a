// The node's own sections: [node], [auth], [backend], [admission], [kinds].

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/policy/model_match.hpp"

namespace sluice::config {

namespace {

/// Most entries of `node.allowed_hosts` and of `node.allowed_origins`.
constexpr size_t browser_entries_limit = 256;

// `node.allowed_hosts` and `node.allowed_origins` (request_access.hpp
// applies them).
void read_browser_access(table_reader& r, node_settings& n) {
  if (auto a = r.array("allowed_hosts")) {
    if (a->size() > browser_entries_limit)
      r.fail("allowed_hosts", "more than 256 names");
    for (auto&& v : *a) {
      auto name = v.value<std::string>();
      if (!name)
        r.fail("allowed_hosts", "must be an array of host names", &v);
      if (name->find(':') != std::string::npos)
        r.fail("allowed_hosts",
               "\"" + *name +
                   "\": a name without a port (a Host with any "
                   "port matches it; addresses need no entry)",
               &v);
      try {
        parse_host_port(*name, {uint16_t{80}, 0});
      } catch (const std::invalid_argument& e) {
        r.fail("allowed_hosts", e.what(), &v);
      }
      std::string lower;
      for (char c : *name)
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      n.allowed_hosts.push_back(std::move(lower));
    }
  }
  if (auto a = r.array("allowed_origins")) {
    n.allowed_origins_line = line_of(*a);
    if (a->size() > browser_entries_limit)
      r.fail("allowed_origins", "more than 256 origins");
    for (auto&& v : *a) {
      auto text = v.value<std::string>();
      if (!text)
        r.fail("allowed_origins", "must be an array of origins", &v);
      if (*text == "*") {
        n.allowed_origins.push_back(*text);
        continue;
      }
      auto origin = normal_origin(*text);
      if (!origin)
        r.fail("allowed_origins",
               "\"" + *text +
                   "\" is not an origin: SCHEME://HOST[:PORT] as "
                   "a browser sends it, no path or trailing '/' (e.g. "
                   "\"https://app.example.com\"), or \"*\"",
               &v);
      n.allowed_origins.push_back(std::move(*origin));
    }
  }
}

} // namespace

void check_browser_access(const node_settings& n) {
  // Without client keys every call is served with the node's own upstream
  // credentials: "*" would let any web page spend them.
  if (n.auth.keys.empty() &&
      std::find(n.allowed_origins.begin(), n.allowed_origins.end(), "*") !=
          n.allowed_origins.end())
    throw config_error("node.allowed_origins",
                       "\"*\" needs auth.keys (any page could otherwise "
                       "call with the node's upstream credentials); list "
                       "the origins instead",
                       n.allowed_origins_line);
}

void read_node(table_reader& r, node_settings& n) {
  if (auto listen = r.string("listen")) {
    try {
      auto hp = parse_host_port(*listen);
      n.listen_host = std::move(hp.host);
      n.listen_port = hp.port;
      n.key_lines["listen"] = line_of(*r.get("listen"));
    } catch (const std::invalid_argument& e) {
      r.fail("listen", std::string{e.what()} +
                           " (HOST:PORT or [V6]:PORT, e.g. \"127.0.0.1:8080\"; "
                           "port 0: any free port)");
    }
  }
  if (auto x = r.integer("max_body_bytes")) {
    if (*x < 1 || *x > max_body_bytes_limit)
      r.fail("max_body_bytes", "must be in [1, 1073741824] (1 GiB)");
    n.max_body_bytes = static_cast<uint64_t>(*x);
  }
  if (auto x = r.span("shutdown_grace_s", 1.0)) {
    if (*x < duration::zero())
      r.fail("shutdown_grace_s", "must not be negative");
    n.shutdown_grace = *x;
  }
  if (auto x = r.string("scheduler")) {
    if (*x != "loops" && *x != "sharing" && *x != "stealing")
      r.fail("scheduler", "must be \"loops\", \"sharing\" or \"stealing\"");
    n.scheduler = *x;
  }
  if (auto x = r.integer("loops")) {
    if (*x < 0 || *x > 256)
      r.fail("loops", "must be in [0, 256] (0: one per core)");
    n.loops = static_cast<uint32_t>(*x);
  }
  if (auto x = r.string("accept")) {
    if (*x != "reuseport" && *x != "handoff")
      r.fail("accept", "must be \"reuseport\" or \"handoff\"");
    n.accept = *x;
  }
  if (auto x = r.integer("actor_threads")) {
    if (*x < 0 || *x > 256)
      r.fail("actor_threads", "must be in [0, 256] (0: one per core)");
    n.actor_threads = static_cast<uint32_t>(*x);
  }
  if (auto x = r.integer("max_connections")) {
    if (*x < 1 || *x > 1000000)
      r.fail("max_connections", "must be in [1, 1000000]");
    n.max_connections = static_cast<uint32_t>(*x);
  }
  if (auto x = r.integer("max_event_subscribers")) {
    if (*x < 0 || *x > 100000)
      r.fail("max_event_subscribers", "must be in [0, 100000] (0: no /events)");
    n.max_event_subscribers = static_cast<uint32_t>(*x);
  }
  if (auto x = r.span("events_ping_s", 1.0)) {
    if (*x <= duration::zero() || *x > std::chrono::hours{1})
      r.fail("events_ping_s", "must be in (0, 3600]");
    n.events_ping = *x;
  }
  if (auto x = r.string("admin_listen")) {
    try {
      n.admin_listen = parse_host_port(*x);
      n.key_lines["admin_listen"] = line_of(*r.get("admin_listen"));
    } catch (const std::invalid_argument& e) {
      r.fail("admin_listen",
             std::string{e.what()} + " (HOST:PORT, e.g. \"127.0.0.1:9090\")");
    }
  }
  read_browser_access(r, n);
  if (auto x = r.integer("admin_max_connections")) {
    if (*x < 1 || *x > 10000)
      r.fail("admin_max_connections", "must be in [1, 10000]");
    n.admin_max_connections = static_cast<uint32_t>(*x);
  }
  if (auto x = r.span("admin_idle_timeout_s", 1.0)) {
    if (*x <= duration::zero() || *x > std::chrono::hours{1})
      r.fail("admin_idle_timeout_s", "must be in (0, 3600]");
    n.admin_idle_timeout = *x;
  }
  if (auto x = r.integer("default_max_tokens")) {
    if (*x < 1 || *x > 10'000'000)
      r.fail("default_max_tokens", "must be in [1, 10000000]",
             r.get("default_max_tokens"));
    n.spend.default_max_tokens = static_cast<uint64_t>(*x);
  }
  if (auto x = r.string("access_log")) {
    if (x->empty())
      r.fail("access_log", "must be \"stdout\", \"off\" or a file path");
    n.access_log = *x;
    n.key_lines["access_log"] = line_of(*r.get("access_log"));
  }
  r.done();
}

namespace {

/// Longest client key name.
constexpr size_t key_name_limit = 64;

/// Most client keys in one config.
constexpr size_t keys_limit = 10000;

// A secret given by reference (env:VAR / file:PATH), hashed at once.
sha256_digest read_digest(table_reader& r, std::string_view key) {
  auto ref = r.string(key);
  if (!ref)
    r.fail(key, "is required (\"env:VAR\" or \"file:PATH\")");
  try {
    return sha256(read_secret(*ref));
  } catch (const std::invalid_argument& e) {
    r.fail(key, e.what());
  }
}

// `[auth.keys.NAME]`.
client_key_config read_key(const std::string& name, const toml::table& t) {
  client_key_config k;
  k.name = name;
  k.line = line_of(t);
  table_reader r{t, "auth.keys." + name};
  auto ok_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
           c == '_' || c == '.';
  };
  if (name.empty() || name.size() > key_name_limit ||
      !std::all_of(name.begin(), name.end(), ok_char))
    throw config_error("auth.keys." + name,
                       "a key name is 1 to 64 letters, digits, '-', '_' or "
                       "'.'",
                       k.line);
  k.digest = read_digest(r, "key");
  if (auto m = r.array("models")) {
    k.models.clear();
    policy::model_rules check;
    for (auto&& v : *m) {
      if (!v.is_string())
        r.fail("models", "must be an array of model names or globs", &v);
      try {
        check.add(*v.value<std::string>(), k.models.size());
      } catch (const std::invalid_argument& e) {
        r.fail("models", e.what(), &v);
      }
      k.models.push_back(*v.value<std::string>());
    }
  }
  if (auto m = r.array("tools")) {
    k.tools.clear();
    for (auto&& v : *m) {
      if (!v.is_string() || v.value<std::string>()->empty() ||
          v.value<std::string>()->size() > 256)
        r.fail("tools", "must be an array of tool names or globs", &v);
      k.tools.push_back(*v.value<std::string>());
    }
  }
  if (auto x = r.count("max_concurrent")) {
    if (*x < 1)
      r.fail("max_concurrent", "must be at least 1");
    k.max_concurrent = *x;
  }
  if (auto x = r.count("requests_per_minute", 60'000'000))
    k.requests_per_minute = *x;
  if (auto x = r.count("burst"))
    k.burst = *x;
  if (k.burst > 0 && k.requests_per_minute == 0)
    r.fail("burst", "needs requests_per_minute");
  read_spend_with_models(r, k.spend);
  r.done();
  return k;
}

} // namespace

void read_auth(table_reader& r, auth_settings& a) {
  if (auto x = r.boolean("allow_anonymous"))
    a.allow_anonymous = *x;
  if (r.get("admin_key") != nullptr)
    a.admin_digest = read_digest(r, "admin_key");
  if (auto t = r.table("keys")) {
    table_reader keys{*t, "auth.keys"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      a.keys.push_back(read_key(name, *keys.table(name)));
      if (a.keys.size() > keys_limit)
        keys.fail(name, "more than 10000 keys");
    }
    keys.done();
  }
  if (a.allow_anonymous && !a.keys.empty())
    r.fail("allow_anonymous",
           "cannot be true with auth.keys: with keys every client needs one");
  // Two names for one key would make the name a client gets a lottery.
  for (size_t i = 0; i < a.keys.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same_digest(a.keys[i].digest, a.keys[j].digest))
        throw config_error("auth.keys." + a.keys[i].name + ".key",
                           "is the same key as auth.keys." + a.keys[j].name,
                           a.keys[i].line);
  if (a.admin_digest)
    for (auto& k : a.keys)
      if (same_digest(k.digest, *a.admin_digest))
        r.fail("admin_key", "is the same key as auth.keys." + k.name);
  r.done();
}

void read_backend(table_reader& r, runtime_config& rc) {
  auto type = r.string("type").value_or("local");
  if (type != "local" && type != "redis")
    r.fail("type", "must be \"local\" or \"redis\"");
  redis_config c;
  if (auto address = r.string("address")) {
    host_port hp;
    try {
      hp = parse_host_port(*address, {redis_default_port, 1});
    } catch (const std::invalid_argument& e) {
      r.fail("address", std::string{e.what()} +
                            " (HOST[:PORT] or [V6][:PORT], e.g. "
                            "\"127.0.0.1:6379\")");
    }
    c.host = std::move(hp.host);
    c.port = hp.port;
  }
  if (auto var = r.string("password_env")) {
    auto value = std::getenv(var->c_str());
    if (value == nullptr)
      r.fail("password_env", "environment variable " + *var + " is not set");
    c.password = value;
  }
  read_fields(
      r, c,
      {text_field<&redis_config::key_prefix>("key_prefix"),
       span_field<&redis_config::connect_timeout>("connect_timeout_ms"),
       span_field<&redis_config::command_timeout>("command_timeout_ms"),
       span_field<&redis_config::reconnect_after>("reconnect_after_ms")});
  read_fields(
      r, rc,
      {span_field<&runtime_config::progress_ttl>("progress_ttl_s"),
       count_field<&runtime_config::cluster_global_cap>("cluster_global_cap"),
       flag_field<&runtime_config::share_breakers>("share_breakers"),
       span_field<&runtime_config::lease_ttl>("lease_ttl_s"),
       span_field<&runtime_config::spend_reservation_ttl>(
           "spend_reservation_ttl_s")});
  if (auto when = r.string("spend_when_down")) {
    if (*when != "closed" && *when != "open")
      r.fail("spend_when_down",
             "must be \"closed\" (refuse calls under a spend limit while "
             "Redis does not answer) or \"open\" (count on this node alone)");
    rc.spend_open_when_down = *when == "open";
  }
  r.done();
  if (type == "redis")
    rc.redis = c;
  // The rules are the library's (one place each); this names key and line.
  // Redis settings given with the local backend are checked too: a typo
  // shows now, not on the day the type changes.
  r.checked([&] {
    validate(c);
    validate_backend(rc);
  });
}

void read_admission(table_reader& r, admission_config& a) {
  auto cap = [&](std::string_view key, int64_t& out) {
    if (auto x = r.integer(key)) {
      if (*x > count_limit || *x < -count_limit)
        r.fail(key, "must be an integer in [1, 2147483647]");
      out = *x;
    }
  };
  cap("session_cap", a.session_cap);
  cap("connection_cap", a.connection_cap);
  cap("global_cap", a.global_cap);
  read_fields(r, a,
              {span_field<&admission_config::wait_timeout>("wait_timeout_s")});
  r.done();
  r.checked([&] { validate(a); });
}

void read_kind(table_reader& r, policy::call_policy& p) {
  using policy::backoff_config;
  using policy::call_policy;
  read_fields(r, p,
              {count_field<&call_policy::max_attempts>("max_attempts"),
               span_field<&call_policy::stall_window>("stall_window_s"),
               span_field<&call_policy::poll_interval>("poll_interval_s"),
               flag_field<&call_policy::rate_limit_spends_retry>(
                   "rate_limit_spends_retry"),
               span_field<&call_policy::attempt_timeout>("timeout_s"),
               span_field<&call_policy::ttft_timeout>("ttft_timeout_s"),
               span_field<&call_policy::max_retry_after>("max_retry_after_s"),
               span_field<&call_policy::hedge_after>("hedge_after_s"),
               count_field<&call_policy::max_hedged>("max_hedged")});
  read_fields(r, p.backoff,
              {span_field<&backoff_config::base>("backoff_base_s"),
               span_field<&backoff_config::cap>("backoff_cap_s"),
               number_field<&backoff_config::jitter>("backoff_jitter")});
  r.done();
  r.checked([&] { validate(p); }, {{"attempt_timeout", "timeout_s"}});
}

} // namespace sluice::config
