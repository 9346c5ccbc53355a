// `[mcp]` and its `[mcp.servers.NAME]` tables (SPEC §13).

#include <algorithm>
#include <utility>

#include "sluice/actors/mcp/mcp_source.hpp"
#include "sluice/runtime/config/secret.hpp"
#include "sluice/runtime/config/sections.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/mcp/tool_names.hpp"

namespace sluice::config {

namespace {

/// Most arguments, and environment variables, given to one server.
constexpr size_t max_server_strings = 256;

/// Longest argument, value or path.
constexpr size_t max_server_string_bytes = 4096;

std::string plain_string(table_reader& r, const toml::node& v,
                         std::string_view key) {
  auto s = v.value<std::string>();
  if (!s)
    r.fail(key, "must be a string", &v);
  if (s->size() > max_server_string_bytes || s->find('\0') != std::string::npos)
    r.fail(key, "must be at most 4096 bytes, no NUL", &v);
  return *s;
}

template <class Secret>
void read_stdio(table_reader& r, mcp_server_settings& s, Secret secret) {
  auto command = r.string("command");
  if (!command || command->empty())
    r.fail("command", "missing; the program that runs the server, e.g. "
                      "\"npx\" or \"/usr/bin/my-server\"");
  s.command = *command;
  if (auto a = r.array("args")) {
    if (a->size() > max_server_strings)
      r.fail("args", "at most 256 arguments");
    for (auto&& v : *a)
      s.args.push_back(plain_string(r, v, "args"));
  }
  if (auto e = r.table("env")) {
    table_reader er{*e, r.prefix() + ".env"};
    if (e->size() > max_server_strings)
      r.fail("env", "at most 256 variables");
    for (auto&& [k, v] : *e) {
      std::string var{k.str()};
      if (var.empty() || var.find('=') != std::string::npos)
        er.fail(var, "a variable name has no '=' and is not empty");
      auto value = plain_string(er, v, var);
      er.get(var);
      s.env.emplace_back(std::move(var), secret(er, v, var, std::move(value)));
    }
    er.done();
  }
  if (auto c = r.string("cwd"))
    s.cwd = *c;
}

mcp_server_settings read_server(const std::string& name, const toml::table& t,
                                source_settings& settings) {
  table_reader r{t, "mcp.servers." + name};
  mcp_server_settings s;
  s.name = name;
  auto transport = r.string("transport").value_or("stdio");
  if (transport == "http")
    s.transport = mcp_transport::http;
  else if (transport != "stdio")
    r.fail("transport", "must be \"stdio\" (a child the node starts) or "
                        "\"http\" (Streamable HTTP at url)");
  // A value `env:VAR` or `file:PATH`, read now (a secret, as a key's).
  auto secret = [](table_reader& tr, const toml::node& v, std::string_view key,
                   std::string value) {
    if (value.rfind("env:", 0) == 0 || value.rfind("file:", 0) == 0) {
      try {
        return read_secret_value(value);
      } catch (const std::invalid_argument& ex) {
        tr.fail(key, ex.what(), &v);
      }
    }
    return value;
  };
  if (s.transport == mcp_transport::http) {
    auto url = r.string("url");
    if (!url || url->empty())
      r.fail("url", "missing; the server's MCP endpoint, e.g. "
                    "\"http://127.0.0.1:3001/mcp\"");
    s.url = *url;
    if (auto h = r.table("headers")) {
      table_reader hr{*h, r.prefix() + ".headers"};
      if (h->size() > 32)
        r.fail("headers", "at most 32 headers");
      for (auto&& [k, v] : *h) {
        std::string name{k.str()};
        auto value = plain_string(hr, v, name);
        hr.get(name);
        s.headers.emplace_back(name, secret(hr, v, name, std::move(value)));
      }
      hr.done();
    }
    if (auto tls = r.table("tls")) {
      table_reader tr{*tls, r.prefix() + ".tls"};
      read_tls(tr, s.tls.emplace());
    }
    if (auto x = r.span("connect_timeout_s", 1.0))
      s.connect_timeout = *x;
    for (auto* stdio_only : {"command", "args", "env", "cwd"})
      if (r.get(stdio_only))
        r.fail(stdio_only, "only for transport = \"stdio\"");
  } else {
    for (auto* http_only : {"url", "headers", "tls", "connect_timeout_s"})
      if (r.get(http_only))
        r.fail(http_only, "only for transport = \"http\"");
    read_stdio(r, s, secret);
  }
  if (auto p = r.string("prefix")) {
    if (!policy::mcp::valid_prefix(*p))
      r.fail("prefix", "0 to 64 letters, digits, '_', '-' or '.'");
    s.prefix = *p;
  } else {
    s.prefix = name + "_";
    if (!policy::mcp::valid_prefix(s.prefix))
      r.fail("prefix", "the default prefix (the name and '_') is no valid "
                       "prefix: set one");
  }
  auto span = [&](const char* key, duration& d) {
    if (auto x = r.span(key, 1.0))
      d = *x;
  };
  span("init_timeout_s", s.init_timeout);
  span("idle_timeout_s", s.idle_timeout);
  span("call_timeout_s", s.call_timeout);
  span("restart_backoff_s", s.restart_backoff);
  span("restart_backoff_max_s", s.restart_backoff_max);
  span("stop_grace_s", s.stop_grace);
  if (auto x = r.count("max_message_bytes"))
    s.max_message_bytes = *x;
  if (auto b = r.table("breaker")) {
    table_reader br{*b, r.prefix() + ".breaker"};
    read_breaker(br, settings.breaker);
  }
  if (auto a = r.table("aimd")) {
    table_reader ar{*a, r.prefix() + ".aimd"};
    read_aimd(ar, settings.aimd);
  }
  try {
    validate(s);
  } catch (const field_error& e) {
    r.fail(e.field(), e.problem());
  }
  r.done();
  return s;
}

} // namespace

void read_mcp(table_reader& r, mcp_settings& m) {
  if (auto k = r.string("kind"))
    m.kind = *k;
  if (auto x = r.count("max_sessions")) {
    if (*x < 1)
      r.fail("max_sessions", "must be at least 1");
    m.max_sessions = *x;
  }
  if (auto x = r.span("session_idle_s", 1.0)) {
    if (*x <= duration::zero())
      r.fail("session_idle_s", "must be positive");
    m.session_idle = *x;
  }
  if (auto t = r.table("servers")) {
    table_reader servers{*t, "mcp.servers"};
    std::vector<std::pair<std::string, std::string>> prefixes;
    for (auto&& [k, v] : *t) {
      std::string name{k.str()};
      auto* st = servers.table(name);
      m.settings.emplace_back();
      m.servers.push_back(read_server(name, *st, m.settings.back()));
      prefixes.emplace_back(name, m.servers.back().prefix);
    }
    try {
      policy::mcp::tool_directory::check_prefixes(prefixes);
    } catch (const std::invalid_argument& e) {
      r.fail("servers", e.what());
    }
    servers.done();
  }
  r.done();
}

} // namespace sluice::config
