#include "runtime/node/status_report.hpp"

#include <chrono>
#include <map>
#include <memory>

#include "messages/atoms.hpp"
#include "messages/breaker.hpp"
#include "runtime/node/fd_limit.hpp"
#include "runtime/node/process_metrics.hpp"
#include "runtime/node/responses.hpp"

namespace sluice::node {

namespace {

json tier_json(const tier_status& t) {
  return {{"cap", t.cap}, {"in_use", t.in_use}, {"waiting", t.waiting}};
}

} // namespace

void collect_scopes(front_state& front, std::function<void(json)> answer) {
  ask_progress_ages(front.rt.system(), front.rt.backend(), front.rt.scopes(),
                    status_backend_timeout,
                    [answer = std::move(answer)](progress_ages ages) {
                      json out = json::object();
                      for (auto& [scope, age] : ages) {
                        json v;
                        if (!age)
                          v = "backend unavailable";
                        else if (age->age) // null: nothing succeeded yet
                          v = std::chrono::duration<double>(*age->age).count();
                        out[scope] = {{"progress_age_s", std::move(v)}};
                      }
                      answer(std::move(out));
                    });
}

void ask_breaker(front_state& front, caf::actor breaker, breaker_action action,
                 std::function<void(std::optional<breaker_status>)> answer) {
  sluice::ask_breaker(front.rt.system(), std::move(breaker), action,
                      breaker_action_timeout, std::move(answer));
}

std::string session_owner(std::string_view session) {
  // The front's session ids: "key/NAME/ID", "anon/ID", "conn/N".
  if (session.rfind("key/", 0) == 0) {
    auto name = session.substr(4);
    return std::string{name.substr(0, name.find('/'))};
  }
  return "anonymous";
}

json status_json(front_state& front, json scopes) {
  // Sessions by who owns them (a key's name, or "anonymous"): never the
  // ids themselves, which a client could use to join another's session.
  json sessions = json::object();
  for (auto& [id, t] : front.rt.live_sessions()) {
    auto& s = sessions[session_owner(id)];
    if (s.is_null())
      s = {{"sessions", 0}, {"in_use", 0}, {"waiting", 0}};
    s["sessions"] = s["sessions"].get<uint64_t>() + 1;
    s["in_use"] = s["in_use"].get<uint64_t>() + t.in_use;
    s["waiting"] = s["waiting"].get<uint64_t>() + t.waiting;
  }
  json keys = json::object();
  for (auto& k : front.keys.all()) {
    auto entry = tier_json(k->tier().status());
    entry["requests"] = k->requests.load();
    entry["rate_limited"] = k->rate_limited.load();
    if (k->config().requests_per_minute > 0)
      entry["requests_per_minute"] = k->config().requests_per_minute;
    keys[k->name()] = std::move(entry);
  }
  json connections = json::object();
  {
    std::lock_guard<std::mutex> guard{front.connections_mx};
    for (auto& [id, c] : front.connections)
      connections[std::to_string(id)] = tier_json(c.tier.status());
  }
  json sources = json::array();
  std::map<std::string, std::string> broken;
  for (auto& [name, why] : front.rt.broken_sources())
    broken[name] = why;
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    auto t = s.tier->load();
    // A source whose actors died is never reported healthy.
    auto dead = broken.find(s.name);
    sources.push_back({{"name", s.name},
                       {"health", dead == broken.end() ? "ok" : "broken"},
                       {"broken_reason", dead == broken.end()
                                             ? json(nullptr)
                                             : json(dead->second)},
                       {"breaker",
                        {{"state", std::string{policy::to_string(b.state)}},
                         {"generation", b.generation}}},
                       {"aimd_limit", s.tier->cap()},
                       {"in_flight", t.in_use}});
    // An https:// source: whether it verifies (false is an explicit
    // opt-out an operator must see) and its handshakes.
    auto http = front.rt.find_http_source(s.name);
    if (http && http->tls)
      sources.back()["tls"] = {
          {"verify", http->tls_verify},
          {"handshakes", http->stats->tls_handshakes.load()},
          {"verify_failures", http->stats->tls_verify_failures.load()}};
  }
  json tiers = {{"global", tier_json(front.rt.tiers().global().status())},
                {"sessions", std::move(sessions)},
                {"keys", std::move(keys)},
                {"connections", std::move(connections)}};
  // The global tier across nodes: this node's leases and waiters.
  if (auto& c = front.rt.cluster_stats())
    tiers["cluster"] = {{"cap", front.rt.config().cluster_global_cap},
                        {"held_here", c->held.load()},
                        {"waiting_here", c->waiting.load()},
                        {"leases_lost", c->lost.load()},
                        {"redis_errors", c->errors.load()}};
  auto fds = current_fd_usage();
  auto& k = front.counters;
  return {{"tiers", std::move(tiers)},
          {"connections", front.open_connections.load()},
          {"calls_in_flight", front.in_flight.load()},
          {"sources", std::move(sources)},
          {"scopes", std::move(scopes)},
          {"limits",
           {{"fd_limit", fds.limit},
            {"fds_open", fds.open},
            {"max_connections", front.settings.max_connections},
            {"event_subscribers", front.events.size()},
            {"max_event_subscribers", front.events.max_subscribers()},
            {"sessions_kept", front.rt.kept_session_count()}}},
          {"refused",
           {{"connections", k.connections_refused.load()},
            {"accept_errors", k.accept_errors.load()},
            {"requests", k.requests_refused.load()},
            {"stream_clients_dropped", k.clients_dropped.load()},
            {"handler_errors", k.handler_errors.load()}}}};
}

std::string metrics_text(front_state& front) {
  std::string g;
  g += "# HELP sluice_breaker_state Breaker state per source (0 closed, 1 "
       "open, 2 half_open).\n# TYPE sluice_breaker_state gauge\n";
  std::string gen = "# HELP sluice_breaker_generation Breaker generation "
                    "(transitions + 1).\n# TYPE sluice_breaker_generation "
                    "gauge\n";
  std::string lim = "# HELP sluice_source_limit AIMD concurrency limit.\n# "
                    "TYPE sluice_source_limit gauge\n";
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    auto label = "{source=\"" + prom_label(s.name) + "\"} ";
    g += "sluice_breaker_state" + label +
         std::to_string(static_cast<int>(b.state)) + "\n";
    gen += "sluice_breaker_generation" + label + std::to_string(b.generation) +
           "\n";
    lim += "sluice_source_limit" + label + std::to_string(s.tier->cap()) + "\n";
  }
  auto global = front.rt.tiers().global().status();
  g += gen + lim;
  g += "# HELP sluice_tier_in_use Permits in use.\n# TYPE sluice_tier_in_use "
       "gauge\nsluice_tier_in_use{tier=\"global\"} " +
       std::to_string(global.in_use) + "\n";
  g += "# HELP sluice_calls_in_flight Calls in flight.\n# TYPE "
       "sluice_calls_in_flight gauge\nsluice_calls_in_flight " +
       std::to_string(front.in_flight.load()) + "\n";
  g += "# HELP sluice_connections_open Client connections open.\n# TYPE "
       "sluice_connections_open gauge\nsluice_connections_open " +
       std::to_string(front.open_connections.load()) + "\n";
  g += "# HELP sluice_stream_clients_dropped_total Stream clients dropped "
       "(gone or too slow).\n# TYPE sluice_stream_clients_dropped_total "
       "counter\nsluice_stream_clients_dropped_total " +
       std::to_string(front.counters.clients_dropped.load()) + "\n";
  return front.metrics.render(g + process_metrics_text());
}

std::string breaker_snapshot_frame(front_state& front) {
  json breakers = json::array();
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    breakers.push_back({{"source", s.name},
                        {"state", std::string{policy::to_string(b.state)}},
                        {"generation", b.generation}});
  }
  return "event: snapshot\ndata: " +
         json_text(json{{"breakers", std::move(breakers)}}) + "\n\n";
}

std::string breaker_event_frame(const breaker_event& ev) {
  // Wall-clock time of the transition (the event carries steady time).
  auto wall = std::chrono::system_clock::now() -
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  steady::now() - ev.at);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                wall.time_since_epoch())
                .count();
  json data{{"source", ev.source},
            {"from", std::string{policy::to_string(ev.from)}},
            {"to", std::string{policy::to_string(ev.to)}},
            {"generation", ev.generation},
            {"at_ms", ms}};
  return "event: breaker\ndata: " + json_text(data) + "\n\n";
}

} // namespace sluice::node
