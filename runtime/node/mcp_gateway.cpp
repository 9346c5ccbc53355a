#include "sluice/runtime/node/mcp_gateway.hpp"

#include <openssl/rand.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace sluice::node {

using json = nlohmann::json;

namespace {

std::string random_id() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1)
    throw std::runtime_error("no random bytes for a session id");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

} // namespace

mcp_gateway::mcp_gateway(
    std::vector<std::shared_ptr<const mcp_server_view>> servers,
    uint32_t max_sessions, duration session_idle)
    : max_sessions_(std::max<uint32_t>(max_sessions, 1))
    , session_idle_(session_idle) {
  set_servers(std::move(servers), max_sessions, session_idle);
}

void mcp_gateway::set_servers(
    std::vector<std::shared_ptr<const mcp_server_view>> servers,
    uint32_t max_sessions, duration session_idle) {
  std::lock_guard<std::mutex> guard{mx_};
  servers_ = std::move(servers);
  max_sessions_ = std::max<uint32_t>(max_sessions, 1);
  session_idle_ = session_idle;
  tools_ = named_list{};
  prompts_ = named_list{};
  for (auto& s : servers_) {
    tools_.dir.add_server(s->name, s->prefix);
    prompts_.dir.add_server(s->name, s->prefix);
  }
  versions_.assign(servers_.size(), UINT64_MAX); // read at the next use
  tools_.defs.resize(servers_.size());
  prompts_.defs.resize(servers_.size());
  resources_.assign(servers_.size(), nullptr);
  templates_.assign(servers_.size(), nullptr);
  uri_server_.clear();
  template_prefixes_.clear();
}

bool mcp_gateway::enabled() const {
  std::lock_guard<std::mutex> guard{mx_};
  return !servers_.empty();
}

std::vector<std::shared_ptr<const mcp_server_view>>
mcp_gateway::servers() const {
  std::lock_guard<std::mutex> guard{mx_};
  return servers_;
}

// -- sessions -----------------------------------------------------------------

std::string mcp_gateway::open_session(const std::string& key,
                                      const std::string& version,
                                      time_point now) {
  auto id = random_id();
  std::lock_guard<std::mutex> guard{mx_};
  // The expired go first; then, at the cap, the one unused longest.
  for (auto i = sessions_.begin(); i != sessions_.end();)
    i = now - i->second.last_used > session_idle_ ? sessions_.erase(i)
                                                  : std::next(i);
  if (sessions_.size() >= max_sessions_) {
    auto oldest = std::min_element(
        sessions_.begin(), sessions_.end(), [](auto& a, auto& b) {
          return a.second.last_used < b.second.last_used;
        });
    sessions_.erase(oldest);
  }
  sessions_[id] = mcp_session{id, key, version, now};
  return id;
}

std::optional<mcp_session> mcp_gateway::use_session(const std::string& id,
                                                    const std::string& key,
                                                    time_point now) {
  std::lock_guard<std::mutex> guard{mx_};
  auto i = sessions_.find(id);
  if (i == sessions_.end() || i->second.key != key)
    return std::nullopt;
  if (now - i->second.last_used > session_idle_) {
    sessions_.erase(i);
    return std::nullopt;
  }
  i->second.last_used = now;
  return i->second;
}

bool mcp_gateway::close_session(const std::string& id, const std::string& key) {
  std::lock_guard<std::mutex> guard{mx_};
  auto i = sessions_.find(id);
  if (i == sessions_.end() || i->second.key != key)
    return false;
  sessions_.erase(i);
  return true;
}

size_t mcp_gateway::sessions() const {
  std::lock_guard<std::mutex> guard{mx_};
  return sessions_.size();
}

// -- tools --------------------------------------------------------------------

void mcp_gateway::set_named(
    named_list& l, size_t server,
    const std::shared_ptr<const std::vector<json>>& items) {
  std::vector<policy::mcp::tool_entry> entries;
  std::map<std::string, json> defs;
  if (items)
    for (auto& t : *items) {
      auto name = t.value("name", std::string{});
      policy::mcp::tool_entry e;
      e.name = name;
      e.hints = tool_hints_of(t);
      entries.push_back(std::move(e));
      defs.emplace(name, t);
    }
  l.dir.set_tools(servers_[server]->name, std::move(entries));
  l.defs[server] = std::move(defs);
}

void mcp_gateway::refresh_locked() {
  bool uris_changed = false;
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto snap = servers_[i]->read();
    if (snap.tools_version == versions_[i])
      continue;
    versions_[i] = snap.tools_version;
    set_named(tools_, i, snap.tools);
    set_named(prompts_, i, snap.prompts);
    resources_[i] = snap.resources;
    templates_[i] = snap.resource_templates;
    uris_changed = true;
  }
  if (!uris_changed)
    return;
  uri_server_.clear();
  template_prefixes_.clear();
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (resources_[i])
      for (auto& r : *resources_[i])
        uri_server_.emplace(r.value("uri", std::string{}), i);
    if (templates_[i])
      for (auto& t : *templates_[i]) {
        auto tpl = t.value("uriTemplate", std::string{});
        auto fixed = tpl.substr(0, tpl.find('{'));
        if (!fixed.empty())
          template_prefixes_.emplace_back(std::move(fixed), i);
      }
  }
}

json mcp_gateway::list_named(
    const named_list& l, const char* field,
    const std::function<bool(const std::string&)>& allowed) {
  json out = json::array();
  for (auto& t : l.dir.list()) {
    if (allowed && !allowed(t.gateway_name))
      continue;
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i]->name != t.server)
        continue;
      auto d = l.defs[i].find(t.name);
      if (d == l.defs[i].end())
        break;
      auto def = d->second;
      def["name"] = t.gateway_name;
      out.push_back(std::move(def));
      break;
    }
  }
  return json{{field, std::move(out)}};
}

json mcp_gateway::list_tools(
    const std::function<bool(const std::string&)>& allowed) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  return list_named(tools_, "tools", allowed);
}

std::optional<policy::mcp::resolved_tool>
mcp_gateway::resolve(const std::string& gateway_name) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  return tools_.dir.resolve(gateway_name);
}

// -- prompts and resources ----------------------------------------------------

json mcp_gateway::list_prompts(
    const std::function<bool(const std::string&)>& allowed) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  return list_named(prompts_, "prompts", allowed);
}

std::optional<policy::mcp::resolved_tool>
mcp_gateway::resolve_prompt(const std::string& gateway_name) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  return prompts_.dir.resolve(gateway_name);
}

json mcp_gateway::list_resources(
    bool templates, const std::function<bool(const std::string&)>& allowed) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  auto key = templates ? "uriTemplate" : "uri";
  json out = json::array();
  std::set<std::string> seen;
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto& items = templates ? templates_[i] : resources_[i];
    if (!items || (allowed && !allowed(servers_[i]->prefix)))
      continue;
    for (auto& r : *items)
      if (seen.insert(r.value(key, std::string{})).second)
        out.push_back(r);
  }
  return json{{templates ? "resourceTemplates" : "resources", std::move(out)}};
}

std::optional<std::string>
mcp_gateway::resource_server(const std::string& uri) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  if (auto i = uri_server_.find(uri); i != uri_server_.end())
    return servers_[i->second]->name;
  const std::pair<std::string, size_t>* best = nullptr;
  for (auto& t : template_prefixes_)
    if (uri.compare(0, t.first.size(), t.first) == 0 &&
        (!best || t.first.size() > best->first.size()))
      best = &t;
  if (best)
    return servers_[best->second]->name;
  return std::nullopt;
}

std::string mcp_gateway::prefix_of(const std::string& server) const {
  std::lock_guard<std::mutex> guard{mx_};
  for (auto& s : servers_)
    if (s->name == server)
      return s->prefix;
  return {};
}

// -- calls in flight ----------------------------------------------------------

uint64_t mcp_gateway::track(const std::string& scope,
                            const std::string& request_id,
                            std::function<void()> cancel) {
  auto key = scope + '\n' + request_id;
  std::lock_guard<std::mutex> guard{mx_};
  if (call_keys_.count(key) != 0)
    return 0;
  auto ticket = next_ticket_++;
  call_keys_.emplace(key, ticket);
  calls_.emplace(ticket, tracked{key, std::move(cancel)});
  return ticket;
}

void mcp_gateway::forget(uint64_t ticket) {
  std::lock_guard<std::mutex> guard{mx_};
  auto i = calls_.find(ticket);
  if (i == calls_.end())
    return;
  call_keys_.erase(i->second.key);
  calls_.erase(i);
}

bool mcp_gateway::cancel(const std::string& scope,
                         const std::string& request_id) {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> guard{mx_};
    auto k = call_keys_.find(scope + '\n' + request_id);
    if (k == call_keys_.end())
      return false;
    fn = calls_[k->second].cancel;
  }
  if (fn)
    fn();
  return true;
}

} // namespace sluice::node
