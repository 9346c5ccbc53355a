#include "sluice/runtime/node/mcp_gateway.hpp"

#include <openssl/rand.h>

#include <algorithm>
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
    : servers_(std::move(servers))
    , max_sessions_(std::max<uint32_t>(max_sessions, 1))
    , session_idle_(session_idle) {
  for (auto& s : servers_)
    dir_.add_server(s->name, s->prefix);
  versions_.assign(servers_.size(), 0);
  defs_.resize(servers_.size());
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

bool mcp_gateway::close_session(const std::string& id,
                                const std::string& key) {
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

void mcp_gateway::refresh_locked() {
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto snap = servers_[i]->read();
    if (snap.tools_version == versions_[i])
      continue;
    versions_[i] = snap.tools_version;
    std::vector<policy::mcp::tool_entry> entries;
    std::map<std::string, json> defs;
    if (snap.tools)
      for (auto& t : *snap.tools) {
        auto name = t.value("name", std::string{});
        policy::mcp::tool_entry e;
        e.name = name;
        e.hints = tool_hints_of(t);
        entries.push_back(std::move(e));
        defs.emplace(name, t);
      }
    dir_.set_tools(servers_[i]->name, std::move(entries));
    defs_[i] = std::move(defs);
  }
}

json mcp_gateway::list_tools(
    const std::function<bool(const std::string&)>& allowed) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  json tools = json::array();
  for (auto& t : dir_.list()) {
    if (allowed && !allowed(t.gateway_name))
      continue;
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i]->name != t.server)
        continue;
      auto d = defs_[i].find(t.name);
      if (d == defs_[i].end())
        break;
      auto def = d->second;
      def["name"] = t.gateway_name;
      tools.push_back(std::move(def));
      break;
    }
  }
  return json{{"tools", std::move(tools)}};
}

std::optional<policy::mcp::resolved_tool>
mcp_gateway::resolve(const std::string& gateway_name) {
  std::lock_guard<std::mutex> guard{mx_};
  refresh_locked();
  return dir_.resolve(gateway_name);
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
