#include "sluice/runtime/policy/mcp/tool_names.hpp"

#include <stdexcept>
#include <unordered_set>

#include "sluice/runtime/policy/model_match.hpp"

namespace sluice::policy::mcp {

namespace {

bool name_byte(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

bool name_bytes(std::string_view s) noexcept {
  for (char c : s)
    if (!name_byte(c))
      return false;
  return true;
}

std::string cut(std::string_view s) {
  return std::string{s.substr(0, max_reported_name_bytes)};
}

[[noreturn]] void refuse(const std::string& what) {
  throw std::invalid_argument(what);
}

void check_server(std::string_view server, std::string_view prefix) {
  if (server.empty())
    refuse("an MCP server needs a name");
  if (!valid_prefix(prefix))
    refuse("tool prefix of MCP server '" + std::string{server} +
           "' must be at most " + std::to_string(max_prefix_bytes) +
           " bytes of A-Z, a-z, 0-9, '_', '.' and '-'");
}

} // namespace

bool valid_tool_name(std::string_view name) noexcept {
  return !name.empty() && name.size() <= max_tool_name_bytes &&
         name_bytes(name);
}

bool valid_prefix(std::string_view prefix) noexcept {
  return prefix.size() <= max_prefix_bytes && name_bytes(prefix);
}

void tool_directory::add_server(std::string server, std::string prefix) {
  check_server(server, prefix);
  for (auto& s : servers_)
    if (s.name == server)
      refuse("MCP server '" + server + "' is added twice");
  servers_.push_back({std::move(server), std::move(prefix), {}});
}

tools_report tool_directory::set_tools(std::string_view server,
                                       std::vector<tool_entry> tools) {
  size_t index = 0;
  while (index < servers_.size() && servers_[index].name != server)
    ++index;
  if (index == servers_.size())
    refuse("no MCP server '" + std::string{server} + "'");
  auto& s = servers_[index];
  tools_report report;
  if (tools.size() > max_tools_per_server) {
    report.over_limit = tools.size() - max_tools_per_server;
    tools.resize(max_tools_per_server);
  }
  // Views into `tools`, which moves nothing until every name is checked.
  std::unordered_set<std::string_view> seen;
  std::vector<bool> keep(tools.size(), false);
  auto leave_out = [&](left_out_tool::reason why, const std::string& name,
                       std::string gateway_name) {
    report.left_out.push_back(
        {why, s.name, cut(name), std::move(gateway_name), {}});
  };
  for (size_t i = 0; i < tools.size(); ++i) {
    auto& name = tools[i].name;
    if (!valid_tool_name(name))
      leave_out(left_out_tool::reason::bad_name, name, {});
    else if (s.prefix.size() + name.size() > max_tool_name_bytes)
      leave_out(left_out_tool::reason::too_long, name, cut(s.prefix + name));
    else if (!seen.insert(name).second)
      leave_out(left_out_tool::reason::duplicate, name, s.prefix + name);
    else
      keep[i] = true;
  }
  seen.clear();
  std::vector<tool_entry> kept;
  kept.reserve(tools.size());
  for (size_t i = 0; i < tools.size(); ++i)
    if (keep[i])
      kept.push_back(std::move(tools[i]));
  s.tools = std::move(kept);
  rebuild();
  for (auto& c : collisions_)
    if (c.server == server || c.holder == server)
      report.left_out.push_back(c);
  return report;
}

void tool_directory::rebuild() {
  by_gateway_name_.clear();
  collisions_.clear();
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto& s = servers_[i];
    for (size_t j = 0; j < s.tools.size(); ++j) {
      auto name = s.prefix + s.tools[j].name;
      auto [at, added] = by_gateway_name_.emplace(name, location{i, j});
      if (!added)
        collisions_.push_back({left_out_tool::reason::collision, s.name,
                               s.tools[j].name, std::move(name),
                               servers_[at->second.server].name});
    }
  }
}

resolved_tool tool_directory::at(location loc) const {
  auto& s = servers_[loc.server];
  auto& t = s.tools[loc.tool];
  return {s.prefix + t.name, s.name, t.name, t.hints};
}

std::optional<resolved_tool>
tool_directory::resolve(std::string_view gateway_name) const {
  if (gateway_name.size() > max_tool_name_bytes)
    return std::nullopt;
  auto i = by_gateway_name_.find(std::string{gateway_name});
  if (i == by_gateway_name_.end())
    return std::nullopt;
  return at(i->second);
}

std::vector<resolved_tool> tool_directory::list() const {
  std::vector<resolved_tool> out;
  out.reserve(by_gateway_name_.size());
  for (size_t i = 0; i < servers_.size(); ++i) {
    auto& s = servers_[i];
    for (size_t j = 0; j < s.tools.size(); ++j) {
      // Only the holder of each name: a collided tool is left out.
      auto k = by_gateway_name_.find(s.prefix + s.tools[j].name);
      if (k != by_gateway_name_.end() && k->second.server == i &&
          k->second.tool == j)
        out.push_back(at(k->second));
    }
  }
  return out;
}

void tool_directory::check_prefixes(
    const std::vector<std::pair<std::string, std::string>>& servers) {
  for (size_t i = 0; i < servers.size(); ++i) {
    auto& [server, prefix] = servers[i];
    check_server(server, prefix);
    for (size_t j = 0; j < i; ++j) {
      auto& [other, other_prefix] = servers[j];
      if (other == server)
        refuse("MCP server '" + server + "' is listed twice");
      if (other_prefix == prefix)
        refuse("MCP servers '" + other + "' and '" + server +
               "' have the same tool prefix " +
               (prefix.empty() ? std::string{"(none)"} : "'" + prefix + "'") +
               ": every tool both offer would collide");
    }
  }
}

bool tool_allowed(const std::vector<std::string>& patterns,
                  std::string_view gateway_name) noexcept {
  if (patterns.empty())
    return true;
  for (auto& p : patterns)
    if (glob_match(p, gateway_name))
      return true;
  return false;
}

} // namespace sluice::policy::mcp
