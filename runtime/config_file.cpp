#include "sluice/runtime/config_file.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "sluice/actors/sim_answers.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/backoff.hpp"
#include "sluice/runtime/policy/model_match.hpp"

namespace sluice {

namespace {

// -- limits (every number in a config has an upper bound)
// ----------------------

/// Largest config file read: far over any real config, and what a parse
/// of hostile bytes may cost.
constexpr std::streamsize config_file_limit = 16 << 20;

/// Largest duration of any `_s` / `_ms` key: a week (as the policies).
constexpr double span_limit_s =
    std::chrono::duration<double>(policy::duration_limit).count();

/// Largest count (caps, AIMD limits, bursts): what a tier counter holds.
constexpr int64_t count_limit = 0x7fffffff;

/// Largest request body the node accepts: 1 GiB.
constexpr int64_t max_body_bytes_limit = int64_t{1} << 30;

/// Most idle keep-alive connections an HTTP source keeps.
constexpr uint32_t idle_connections_limit = 10000;

/// Largest quota rate, per second.
constexpr double rate_limit_per_s = 1e9;

/// Largest route weight (weights are relative; larger is a typo).
constexpr double weight_limit = 1e6;

/// Redis' port when `backend.address` names none.
constexpr uint16_t redis_default_port = 6379;

int line_of(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string{key} : prefix + "." + std::string{key};
}

// Reads one TOML table strictly: every key read is remembered, and `done()`
// refuses the first key nobody asked for. Errors name the dotted key and the
// line.
class table_reader {
public:
  table_reader(const toml::table& t, std::string prefix)
      : table_(t)
      , prefix_(std::move(prefix)) {
    // nop
  }

  const std::string& prefix() const noexcept { return prefix_; }

  int line() const { return line_of(table_); }

  [[noreturn]] void fail(std::string_view key, const std::string& problem,
                         const toml::node* at = nullptr) const {
    if (at == nullptr)
      at = table_.get(key);
    throw config_error(join(prefix_, key), problem,
                       at != nullptr ? line_of(*at) : line());
  }

  const toml::node* get(std::string_view key) {
    known_.insert(std::string{key});
    return table_.get(key);
  }

  std::optional<int64_t> integer(std::string_view key) {
    return typed<int64_t>(key, &toml::node::is_integer, "must be an integer");
  }

  std::optional<double> number(std::string_view key) {
    return typed<double>(key, &toml::node::is_number, "must be a number");
  }

  std::optional<bool> boolean(std::string_view key) {
    return typed<bool>(key, &toml::node::is_boolean, "must be true or false");
  }

  std::optional<std::string> string(std::string_view key) {
    return typed<std::string>(key, &toml::node::is_string, "must be a string");
  }

  /// A duration given as a number of `unit`s (key ends in _s or _ms).
  std::optional<duration> span(std::string_view key, double unit_seconds) {
    auto x = number(key);
    if (!x)
      return std::nullopt;
    if (!std::isfinite(*x) || std::fabs(*x * unit_seconds) > span_limit_s)
      fail(key, "must be at most a week (604800 s)");
    return std::chrono::duration_cast<duration>(
        std::chrono::duration<double>(*x * unit_seconds));
  }

  std::optional<uint32_t> count(std::string_view key,
                                int64_t max = count_limit) {
    auto x = integer(key);
    if (!x)
      return std::nullopt;
    if (*x < 0 || *x > max)
      fail(key, "must be an integer in [0, " + std::to_string(max) + "]");
    return static_cast<uint32_t>(*x);
  }

  const toml::table* table(std::string_view key) {
    auto n = get(key);
    if (n == nullptr)
      return nullptr;
    if (!n->is_table())
      fail(key, "must be a table", n);
    return n->as_table();
  }

  const toml::array* array(std::string_view key) {
    auto n = get(key);
    if (n == nullptr)
      return nullptr;
    if (!n->is_array())
      fail(key, "must be an array", n);
    return n->as_array();
  }

  /// Refuses any key that was not read.
  void done() const {
    for (auto&& [k, v] : table_)
      if (known_.count(std::string{k.str()}) == 0)
        throw config_error(join(prefix_, k.str()), "unknown key", line_of(v));
  }

  /// Runs `check`; turns its `std::invalid_argument("field: problem")` into
  /// a `config_error` for the config key of `field` (one of `field`,
  /// `field_s`, `field_ms`, or `aliases[field]`) with its line.
  void checked(std::function<void()> check,
               const std::map<std::string, std::string>& aliases = {}) const {
    try {
      check();
    } catch (const config_error&) {
      throw;
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      auto colon = what.find(": ");
      auto field = what.substr(0, colon);
      auto problem = colon == std::string::npos ? what : what.substr(colon + 2);
      std::vector<std::string> candidates{field, field + "_s", field + "_ms"};
      if (auto i = aliases.find(field); i != aliases.end())
        candidates.insert(candidates.begin(), i->second);
      for (auto& c : candidates)
        if (auto n = table_.get(c))
          throw config_error(join(prefix_, c), problem, line_of(*n));
      throw config_error(join(prefix_, field), problem, line());
    }
  }

private:
  // Reads `key` as a T if present; refuses a value of another type.
  template <class T>
  std::optional<T> typed(std::string_view key,
                         bool (toml::node::*is_type)() const noexcept,
                         const char* expected) {
    auto n = get(key);
    if (n == nullptr)
      return std::nullopt;
    if (!(n->*is_type)())
      fail(key, expected, n);
    return n->value<T>();
  }

  const toml::table& table_;
  std::string prefix_;
  std::set<std::string> known_;
};

// -- sections -----------------------------------------------------------------

void read_node(table_reader& r, node_settings& n) {
  if (auto listen = r.string("listen")) {
    try {
      auto hp = parse_host_port(*listen);
      n.listen_host = std::move(hp.host);
      n.listen_port = hp.port;
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
    if (*x != "sharing" && *x != "stealing")
      r.fail("scheduler", "must be \"sharing\" or \"stealing\"");
    n.scheduler = *x;
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
    } catch (const std::invalid_argument& e) {
      r.fail("admin_listen", std::string{e.what()} +
                                 " (HOST:PORT, e.g. \"127.0.0.1:9090\")");
    }
  }
  if (auto x = r.string("access_log")) {
    if (x->empty())
      r.fail("access_log", "must be \"stdout\", \"off\" or a file path");
    n.access_log = *x;
  }
  r.done();
}

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
  r.done();
  return k;
}

// `[auth]`.
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

// `[backend]`: where scope progress lives -- in process ("local", the
// default) or in Redis, shared by several nodes.
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
  if (auto x = r.string("key_prefix"))
    c.key_prefix = *x;
  auto positive = [&](std::string_view key, duration& out) {
    if (auto x = r.span(key, 0.001)) {
      if (*x <= duration::zero())
        r.fail(key, "must be positive");
      out = *x;
    }
  };
  positive("connect_timeout_ms", c.connect_timeout);
  positive("command_timeout_ms", c.command_timeout);
  positive("reconnect_after_ms", c.reconnect_after);
  if (auto x = r.span("progress_ttl_s", 1.0)) {
    if (*x < std::chrono::seconds{1})
      r.fail("progress_ttl_s", "must be at least 1");
    rc.progress_ttl = *x;
  }
  if (auto x = r.integer("cluster_global_cap")) {
    if (*x < 0 || *x > 2147483647)
      r.fail("cluster_global_cap", "must be in [0, 2147483647] (0: none)");
    if (*x > 0 && type != "redis")
      r.fail("cluster_global_cap", "needs type = \"redis\"");
    rc.cluster_global_cap = static_cast<uint32_t>(*x);
  }
  if (auto x = r.boolean("share_breakers"))
    rc.share_breakers = *x;
  if (auto x = r.span("lease_ttl_s", 1.0)) {
    if (*x < std::chrono::milliseconds{100})
      r.fail("lease_ttl_s", "must be at least 0.1");
    rc.lease_ttl = *x;
  }
  r.done();
  if (type == "redis")
    rc.redis = c;
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
  if (auto x = r.span("wait_timeout_s", 1.0))
    a.wait_timeout = *x;
  r.done();
  r.checked([&] {
    try {
      validate(a);
    } catch (const config_error& e) {
      // validate() names "admission.X"; report the key as written.
      auto field = e.key().substr(e.key().find('.') + 1);
      throw std::invalid_argument(field + ": " + e.problem());
    }
  });
}

void read_kind(table_reader& r, policy::call_policy& p) {
  if (auto x = r.count("max_attempts"))
    p.max_attempts = *x;
  if (auto x = r.span("stall_window_s", 1.0))
    p.stall_window = *x;
  if (auto x = r.span("backoff_base_s", 1.0))
    p.backoff.base = *x;
  if (auto x = r.span("backoff_cap_s", 1.0))
    p.backoff.cap = *x;
  if (auto x = r.number("backoff_jitter"))
    p.backoff.jitter = *x;
  if (auto x = r.span("poll_interval_s", 1.0))
    p.poll_interval = *x;
  if (auto x = r.boolean("rate_limit_spends_retry"))
    p.rate_limit_spends_retry = *x;
  if (auto x = r.span("timeout_s", 1.0))
    p.attempt_timeout = *x;
  if (auto x = r.span("ttft_timeout_s", 1.0))
    p.ttft_timeout = *x;
  if (auto x = r.span("max_retry_after_s", 1.0))
    p.max_retry_after = *x;
  r.done();
  r.checked([&] { validate(p); }, {{"attempt_timeout", "timeout_s"}});
}

policy::outcome_class read_class(table_reader& r, std::string_view key,
                                 policy::outcome_class dflt) {
  auto s = r.string(key);
  if (!s)
    return dflt;
  if (auto c = policy::parse_outcome_class(*s))
    return *c;
  r.fail(key, "must be \"success\", \"failure\" or \"ignored\"");
}

void read_breaker(table_reader& r, policy::breaker_config& b) {
  if (auto w = r.string("window")) {
    if (*w == "count")
      b.window = policy::breaker_config::window_kind::count;
    else if (*w == "time")
      b.window = policy::breaker_config::window_kind::time;
    else
      r.fail("window", "must be \"count\" or \"time\"");
  }
  if (auto x = r.count("window_size"))
    b.window_size = *x;
  if (auto x = r.span("window_span_s", 1.0))
    b.window_span = *x;
  if (auto x = r.count("window_buckets"))
    b.window_buckets = *x;
  if (auto x = r.count("min_samples"))
    b.min_samples = *x;
  if (auto x = r.number("failure_rate_threshold"))
    b.failure_rate_threshold = *x;
  if (auto x = r.span("slow_call_s", 1.0))
    b.slow_call = *x;
  if (auto x = r.number("slow_call_rate_threshold"))
    b.slow_call_rate_threshold = *x;
  if (auto x = r.span("open_duration_s", 1.0))
    b.open_duration = *x;
  if (auto x = r.number("open_duration_growth"))
    b.open_duration_growth = *x;
  if (auto x = r.span("open_duration_max_s", 1.0))
    b.open_duration_max = *x;
  if (auto x = r.count("half_open_probes"))
    b.half_open_probes = *x;
  if (auto x = r.boolean("open_on_retry_after"))
    b.open_on_retry_after = *x;
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
  if (auto x = r.count("initial"))
    a.initial = *x;
  if (auto x = r.count("min"))
    a.min = *x;
  if (auto x = r.count("max"))
    a.max = *x;
  if (auto x = r.count("increase"))
    a.increase = *x;
  if (auto x = r.number("decrease_ratio"))
    a.decrease_ratio = *x;
  r.done();
  r.checked([&] { validate(a); });
}

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
  if (auto x = r.span("length_s", 1.0))
    p.length = *x;
  if (auto x = r.span("latency_min_ms", 1e-3))
    p.latency_min = *x;
  if (auto x = r.span("latency_max_ms", 1e-3))
    p.latency_max = *x;
  if (p.latency_max < p.latency_min && !r.get("latency_max_ms"))
    p.latency_max = p.latency_min; // only the minimum given
  if (auto x = r.number("transient_rate"))
    p.transient_rate = *x;
  if (auto x = r.number("rate_limit_rate"))
    p.rate_limit_rate = *x;
  if (auto x = r.number("permanent_rate"))
    p.permanent_rate = *x;
  if (auto x = r.number("hang_rate"))
    p.hang_rate = *x;
  if (auto x = r.number("stream_break_rate"))
    p.stream_break_rate = *x;
  if (auto x = r.span("retry_after_s", 1.0))
    p.retry_after = *x;
  r.done();
}

// `[sources.NAME.tls]` of an https:// source. The files are checked here,
// so a bad one is named with its key and line (the source's own check
// repeats it for services that build the config in code).
void read_tls(table_reader& r, http_tls_config& tls) {
  if (auto x = r.string("ca_file"))
    tls.ca_file = *x;
  if (auto x = r.string("client_cert"))
    tls.client_cert = *x;
  if (auto x = r.string("client_key"))
    tls.client_key = *x;
  if (auto x = r.string("server_name"))
    tls.server_name = *x;
  if (auto x = r.boolean("verify"))
    tls.verify = *x;
  r.done();
  r.checked([&] { validate(tls); });
}

source_decl read_source(const std::string& name, const toml::table& t) {
  table_reader r{t, "sources." + name};
  source_decl d;
  d.name = name;
  d.line = r.line();
  auto type = r.string("type");
  if (!type)
    r.fail("type", "missing; must be \"simulated\" or \"http\"");
  if (*type != "simulated" && *type != "http")
    r.fail("type", "unknown source type '" + *type +
                       "' (supported: \"simulated\", \"http\")");
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
    // On an http:// URL the source's own check refuses the table (below).
    if (auto tls = r.table("tls")) {
      table_reader tr{*tls, r.prefix() + ".tls"};
      read_tls(tr, d.http.tls.emplace());
    }
    if (auto x = r.span("connect_timeout_s", 1.0))
      d.http.connect_timeout = *x;
    if (auto x = r.span("first_byte_timeout_s", 1.0))
      d.http.first_byte_timeout = *x;
    if (auto x = r.span("idle_timeout_s", 1.0))
      d.http.idle_timeout = *x;
    if (auto x = r.span("response_timeout_s", 1.0))
      d.http.response_timeout = *x;
    if (auto x = r.count("max_idle_connections", idle_connections_limit))
      d.http.max_idle_connections = *x;
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
  try {
    validate(d.sim);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    auto colon = what.find(": ");
    throw config_error(r.prefix() + "." + what.substr(0, colon),
                       what.substr(colon + 2), d.line);
  }
  return d;
}

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
  for (std::string_view own : {"/healthz", "/status", "/metrics", "/events",
                               "/v1/models"})
    if (path == own || (own == "/v1/models" && path.rfind("/v1/models/", 0) == 0))
      throw config_error(r.prefix(),
                         "'" + path + "' is the node's own endpoint", d.line);
  if (auto k = r.string("kind")) {
    if (cfg.runtime.kinds.count(*k) == 0)
      r.fail("kind", "unknown call kind '" + *k + "'");
    d.route.kind = *k;
  }
  // A list of known source names, and optional weights, one per source.
  auto read_sources = [&](table_reader& in, const std::string& key,
                          const toml::array& list, const toml::array* weights,
                          std::vector<std::string>& names,
                          std::vector<double>& ws) {
    if (list.empty())
      in.fail(key, "needs at least one source");
    for (auto& n : list) {
      if (!n.is_string())
        in.fail(key, "must be an array of source names", &n);
      auto name = *n.value<std::string>();
      bool known = false;
      for (auto& s : cfg.sources)
        known = known || s.name == name;
      if (!known)
        in.fail(key, "unknown source '" + name + "'", &n);
      names.push_back(name);
    }
    if (weights == nullptr)
      return;
    for (auto& n : *weights) {
      if (!n.is_number() || !(*n.value<double>() > 0.0) ||
          !(*n.value<double>() <= weight_limit))
        in.fail("weights", "must be positive numbers, at most 1e6", &n);
      ws.push_back(*n.value<double>());
    }
    if (ws.size() != names.size())
      in.fail("weights", "needs one weight per source");
  };
  auto sources = r.array("sources");
  auto models = r.table("models");
  if (!sources && !models)
    r.fail("sources", "needs at least one source (or a models table)");
  if (sources)
    read_sources(r, "sources", *sources, r.array("weights"), d.route.sources,
                 d.route.weights);
  else if (r.array("weights"))
    r.fail("weights", "needs sources");
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
                "must be an array of source names or a table with sources",
                &v);
      }
      d.route.models.push_back(std::move(m));
    }
    mr.done();
  }
  if (auto s = r.string("scope"))
    d.route.scope = *s;
  r.done();
  return d;
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
    read_node(r, cfg.node);
  }
  if (auto t = top.table("auth")) {
    table_reader r{*t, "auth"};
    read_auth(r, cfg.node.auth);
  }
  if (auto t = top.table("admission")) {
    table_reader r{*t, "admission"};
    read_admission(r, cfg.runtime.admission);
  }
  if (auto t = top.table("backend")) {
    table_reader r{*t, "backend"};
    read_backend(r, cfg.runtime);
  }
  if (auto t = top.table("kinds")) {
    table_reader kinds{*t, "kinds"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      auto kt = kinds.table(name);
      table_reader r{*kt, "kinds." + name};
      auto& p = cfg.runtime.kinds[name]; // defaults for chat / embeddings
      read_kind(r, p);
    }
    kinds.done();
  }
  if (auto x = top.integer("seed"))
    cfg.runtime.seed = static_cast<uint64_t>(*x);
  if (auto t = top.table("sources")) {
    table_reader sources{*t, "sources"};
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      cfg.sources.push_back(read_source(name, *sources.table(name)));
    }
    sources.done();
  }
  if (auto t = top.table("routes")) {
    table_reader routes{*t, "routes"};
    for (auto&& [k, v] : *t) {
      std::string path{k.str()};
      cfg.routes.push_back(read_route(path, *routes.table(path), cfg));
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
  std::string text(static_cast<size_t>(config_file_limit) + 1, '\0');
  in.read(text.data(), config_file_limit + 1);
  if (in.bad())
    throw config_error("file", "cannot read '" + path + "'");
  if (in.gcount() > config_file_limit)
    throw config_error("file", "'" + path + "' is larger than 16 MiB");
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_config(text, path);
}

void install(runtime& rt, const file_config& cfg) {
  for (auto& s : cfg.sources) {
    if (s.type == "http")
      rt.add_http_source(s.name, s.http, s.settings);
    else
      rt.add_simulated_source(s.name, s.sim, s.settings);
  }
  for (auto& r : cfg.routes)
    rt.add_route(r.route);
}

namespace {

constexpr std::string_view default_config_head =
    R"toml(# sluice-node default configuration: two simulated upstreams behind the
# OpenAI-compatible routes, so the node works on a fresh machine with no
# upstream at all. Print it with --print-default-config, edit, run with
# --config FILE. Durations end in _s (seconds) or _ms (milliseconds).

[node]
listen = "127.0.0.1:8080"     # HOST:PORT, [V6]:PORT or NAME:PORT (localhost)
max_body_bytes = 1048576      # larger request bodies get 413
shutdown_grace_s = 10         # SIGINT/SIGTERM: let in-flight calls finish
scheduler = "sharing"         # CAF scheduler: "sharing" or "stealing"
actor_threads = 0             # CAF worker threads; 0: half the cores (>= 1)
max_connections = 10000       # client connections at once; more are closed
max_event_subscribers = 256   # GET /events clients at once (503 beyond)
events_ping_s = 10            # ": ping" to every /events client this often
access_log = "stdout"         # one JSON line per request: "stdout", a path, "off"
# admin_listen = "127.0.0.1:9090"  # /status /metrics /events /admin/ served
#                                  # there (only), without a key

# Client keys: with any, every call needs one (Authorization: Bearer KEY).
# Without keys the node serves anyone, and only on a loopback address unless
# allow_anonymous = true. Keys are read from the environment or a file.
# [auth]
# admin_key = "env:SLUICE_ADMIN_KEY"  # /status etc. on node.listen need it
#   [auth.keys.team-a]
#   key = "env:TEAM_A_KEY"            # or "file:/run/secrets/team-a"
#   models = ["sim-*"]                # globs this key may use (default "*")
#   max_concurrent = 16               # its calls in flight (its session tier)
#   requests_per_minute = 600         # 429 rate_limit_exceeded beyond

[admission]
session_cap = 16              # calls in flight per session (X-Session-Id)
connection_cap = 256          # calls in flight per client connection
global_cap = 1024             # calls in flight in the node
wait_timeout_s = 3            # one deadline for all three tiers

[backend]                     # where each scope's progress marker lives
type = "local"                # "local": this process; "redis": shared by nodes
progress_ttl_s = 3600         # a marker's lifetime (far over any stall window)
# With type = "redis":
# address = "127.0.0.1:6379"
# password_env = "SLUICE_REDIS_PASSWORD"   # the variable holding the password
# key_prefix = "sluice:"
# connect_timeout_ms = 500
# command_timeout_ms = 500    # Redis slower than this: the call fails closed
# reconnect_after_ms = 500    # pause between reconnects while Redis is down
# cluster_global_cap = 0      # calls in flight across all nodes (0: none)
# lease_ttl_s = 10            # a dead node's permits come back within this
# share_breakers = true       # a breaker opening on one node opens on all

)toml";

// The kinds' part of the default config, printed from
// `runtime_config::default_kinds()`: a node run on the default config and
// a library user who names no kinds get the same policies (they differed:
// chat's timeout was 120 s here, 300 s there).
std::string default_kinds_text() {
  auto secs = [](duration d) {
    return fmt::format("{}", std::chrono::duration<double>(d).count());
  };
  std::string out =
      "# Call kinds: the library's defaults (runtime_config::default_kinds),\n"
      "# printed from them. A [kinds.NAME] table overrides the keys it "
      "names.\n";
  for (const auto& [name, p] : runtime_config::default_kinds()) {
    out += fmt::format("[kinds.{}]\n", name);
    out += fmt::format("max_attempts = {}\n", p.max_attempts);
    out += fmt::format("stall_window_s = {}\n", secs(p.stall_window));
    out += fmt::format("timeout_s = {}\n", secs(p.attempt_timeout));
    if (p.ttft_timeout)
      out += fmt::format("ttft_timeout_s = {}\n", secs(*p.ttft_timeout));
    out += fmt::format("backoff_base_s = {}\n", secs(p.backoff.base));
    out += fmt::format("backoff_cap_s = {}\n", secs(p.backoff.cap));
    out += fmt::format("backoff_jitter = {}\n", p.backoff.jitter);
    out += fmt::format("poll_interval_s = {}\n", secs(p.poll_interval));
    out += fmt::format("rate_limit_spends_retry = {}{}\n",
                       p.rate_limit_spends_retry,
                       p.rate_limit_spends_retry
                           ? "   # every failure spends the retry budget"
                           : "  # a 429 does not spend the retry budget");
    out += fmt::format("max_retry_after_s = {}\n\n", secs(p.max_retry_after));
  }
  return out;
}

constexpr std::string_view default_config_tail =
    R"toml(# Simulated upstreams answer in OpenAI's shapes (chat completions, chunk
# streams, embeddings of `embedding_dimensions` floats), so official clients
# work against this config as is.
[sources.sim-primary]
type = "simulated"
seed = 1
  [sources.sim-primary.breaker]
  window_size = 20
  min_samples = 10
  failure_rate_threshold = 0.5
  open_duration_s = 10
  [sources.sim-primary.aimd]
  initial = 32
  max = 128
  [[sources.sim-primary.phases]]
  latency_min_ms = 20
  latency_max_ms = 120
  transient_rate = 0.02
  rate_limit_rate = 0.01

[sources.sim-backup]
type = "simulated"
seed = 2
  [[sources.sim-backup.phases]]
  latency_min_ms = 40
  latency_max_ms = 200

# A route's `sources` serve every model (and requests naming none); its
# `models` table sends named models (exact, or globs like "gpt-4o*") to
# sources of their own. GET /v1/models lists the exact names.
[routes."/v1/chat/completions"]
kind = "chat"
sources = ["sim-primary", "sim-backup"]
  [routes."/v1/chat/completions".models]
  "sim-chat" = ["sim-primary", "sim-backup"]

[routes."/v1/embeddings"]
kind = "embeddings"
sources = ["sim-backup", "sim-primary"]
  [routes."/v1/embeddings".models]
  "sim-embedding" = ["sim-backup", "sim-primary"]
)toml";

} // namespace

std::string_view default_config_text() {
  // Built once; the text lives as long as the process.
  static const std::string text = std::string{default_config_head} +
                                  default_kinds_text() +
                                  std::string{default_config_tail};
  return text;
}

} // namespace sluice
