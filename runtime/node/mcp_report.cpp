#include "sluice/runtime/node/mcp_report.hpp"

#include "sluice/actors/log.hpp"
#include "sluice/runtime/node/metrics.hpp"

namespace sluice::node {

using json = nlohmann::json;

namespace {

json server_json(const mcp_server_view& v,
                 const mcp_server_view::snapshot& snap) {
  auto size = [](const auto& list) { return list ? list->size() : 0; };
  return {{"name", v.name},
          {"source", "mcp:" + v.name},
          {"prefix", v.prefix},
          {"state", std::string{to_string(snap.state)}},
          {"pid", snap.pid > 0 ? json(snap.pid) : json(nullptr)},
          {"restarts", snap.restarts},
          {"last_exit",
           snap.last_exit.empty() ? json(nullptr) : json(snap.last_exit)},
          {"protocol_version", snap.protocol_version},
          {"tools", size(snap.tools)},
          {"prompts", size(snap.prompts)},
          {"resources", size(snap.resources)},
          {"resource_templates", size(snap.resource_templates)}};
}

} // namespace

json mcp_status(front_state& front) {
  json servers = json::array();
  for (auto& v : front.mcp.servers()) {
    auto s = server_json(*v, v->read());
    s["calls"] = v->calls.load();
    s["progress_notifications"] = v->progress.load();
    s["cancels_sent"] = v->cancels_sent.load();
    s["bad_lines"] = v->bad_lines.load();
    servers.push_back(std::move(s));
  }
  return {{"servers", std::move(servers)},
          {"sessions", front.mcp.sessions()}};
}

void write_mcp_metrics(prom_text& out, front_state& front) {
  auto servers = front.mcp.servers();
  if (servers.empty())
    return;
  std::vector<mcp_server_view::snapshot> snaps;
  for (auto& v : servers)
    snaps.push_back(v->read());
  out.family("sluice_mcp_server_up", "gauge",
             "1 while an MCP server is initialized and ready, else 0.");
  for (size_t i = 0; i < servers.size(); ++i)
    out.sample("sluice_mcp_server_up", {{"server", servers[i]->name}},
               snaps[i].state == mcp_server_view::state_kind::ready ? 1 : 0);
  out.family("sluice_mcp_server_restarts_total", "counter",
             "Times an MCP server was started again (a child that exited, "
             "an HTTP session that ended).");
  for (size_t i = 0; i < servers.size(); ++i)
    out.sample("sluice_mcp_server_restarts_total",
               {{"server", servers[i]->name}}, snaps[i].restarts);
  out.family("sluice_mcp_server_tools", "gauge",
             "Tools an MCP server lists now.");
  for (size_t i = 0; i < servers.size(); ++i)
    out.sample("sluice_mcp_server_tools", {{"server", servers[i]->name}},
               snaps[i].tools ? snaps[i].tools->size() : 0);
  struct counter {
    const char* name;
    const char* help;
    std::atomic<uint64_t> mcp_server_view::*field;
  };
  const counter counters[] = {
      {"sluice_mcp_progress_notifications_total",
       "Progress notifications from an MCP server for calls in flight.",
       &mcp_server_view::progress},
      {"sluice_mcp_cancels_sent_total",
       "notifications/cancelled sent to an MCP server.",
       &mcp_server_view::cancels_sent},
      {"sluice_mcp_bad_messages_total",
       "Messages from an MCP server that were no JSON-RPC, over the size "
       "limit, or answered nothing of ours.",
       &mcp_server_view::bad_lines},
  };
  for (auto& c : counters) {
    out.family(c.name, "counter", c.help);
    for (auto& v : servers)
      out.sample(c.name, {{"server", v->name}}, ((*v).*c.field).load());
  }
}

void start_mcp_events(front_state& front) {
  for (auto& v : front.mcp.servers()) {
    auto* view = v.get();
    view->on_state_change(
        [&front, view](const mcp_server_view::snapshot& snap) {
          try {
            auto text = server_json(*view, snap).dump(
                -1, ' ', false, json::error_handler_t::replace);
            front.events.publish("event: mcp_server\ndata: " + text + "\n\n");
          } catch (const std::exception& e) {
            static log_limit lim;
            log_limited(lim, spdlog::level::err,
                        "publishing an MCP server event threw: {}", e.what());
          }
        });
  }
}

void stop_mcp_events(front_state& front) {
  for (auto& v : front.mcp.servers())
    v->on_state_change(nullptr);
}

} // namespace sluice::node
