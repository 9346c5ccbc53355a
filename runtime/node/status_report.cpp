#include "sluice/runtime/node/status_report.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/breaker.hpp"
#include "sluice/runtime/node/fd_limit.hpp"
#include "sluice/runtime/node/mcp_report.hpp"
#include "sluice/runtime/node/process_metrics.hpp"
#include "sluice/runtime/node/responses.hpp"
#include "sluice/runtime/node/spend_report.hpp"
#include "sluice/runtime/redis/breaker_relay.hpp"

namespace sluice::node {

namespace {

json tier_json(const tier_status& t) {
  return {{"cap", t.cap}, {"in_use", t.in_use}, {"waiting", t.waiting}};
}

int64_t wall_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             t.time_since_epoch())
      .count();
}

double millis(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The calls' figures of /status: the gateway overhead histogram
// (cumulative; a reader takes quantiles of the difference between two
// reads) and each route's slowest recent calls with their stall accounts.
json calls_json(const node_metrics::figures& f) {
  json bounds = json::array();
  for (auto b : node_metrics::overhead_buckets)
    bounds.push_back(b);
  json slowest = json::object();
  for (auto& [route, calls] : f.slowest) {
    json list = json::array();
    for (auto& c : calls)
      list.push_back({{"status", c.status},
                      {"attempts", c.attempts},
                      {"elapsed_ms", millis(c.elapsed)},
                      {"stalled_ms", millis(c.stalled)},
                      {"productive_ms", millis(c.productive)},
                      {"at_ms", c.at_ms}});
    slowest[route] = std::move(list);
  }
  return {{"overhead",
           {{"bounds_s", std::move(bounds)},
            {"buckets", f.overhead_counts},
            {"count", f.overhead_count},
            {"sum_s", f.overhead_sum}}},
          {"slowest", std::move(slowest)}};
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

// The event loops the front runs on (count 0: CAF's scheduler and threads
// of the front's own), how connections reach them, the connections each
// accepted, and results handed to a connection from another thread.
json loops_status(front_state& front) {
  json accepted = json::array();
  for (auto& n : front.accepted)
    accepted.push_back(n.load());
  return {{"count", front.shared_loops ? front.loops.size() : 0},
          {"accept", front.accept_mode()},
          {"accepted", std::move(accepted)},
          {"cross_loop_posts", front.counters.cross_loop_posts.load()}};
}

json config_json(front_state& front) {
  json out = {{"draining_sources", front.rt.draining_sources()}};
  auto* reloader = front.reloader.load(std::memory_order_acquire);
  if (reloader == nullptr) {
    out["generation"] = 1;
    out["reload"] = false;
    return out;
  }
  auto st = reloader->status();
  out["generation"] = st.generation;
  out["reload"] = true;
  out["path"] = st.path.empty() ? json(nullptr) : json(st.path);
  out["loaded_ms"] = st.loaded_unix * 1000;
  out["reloads_refused"] = st.failed;
  if (!st.last_error.empty()) {
    out["last_refusal"] = st.last_error;
    out["last_refusal_ms"] = st.last_error_unix * 1000;
  }
  return out;
}

json reload_json(const reload_outcome& r, std::vector<std::string> draining) {
  auto diff = [](const policy::named_diff& d) {
    return json{{"added", d.added},
                {"replaced", d.replaced},
                {"tuned", d.tuned},
                {"removed", d.removed},
                {"kept", d.kept}};
  };
  return {{"reloaded", r.ok},
          {"generation", r.generation},
          {"sources", diff(r.diff.sources)},
          {"routes", diff(r.diff.routes)},
          {"mcp_servers", diff(r.mcp)},
          {"restart_needed", r.restart_needed},
          {"draining_sources", std::move(draining)}};
}

json healthz_json(front_state& front) {
  auto broken = front.rt.broken_sources();
  if (broken.empty())
    return {{"status", "ok"}};
  json why = json::object();
  for (auto& [name, reason] : broken)
    why[name] = reason;
  return {{"status", "degraded"}, {"broken_sources", std::move(why)}};
}

json status_json(front_state& front, json scopes, const shared_counts* shared) {
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
  auto key_set = front.keys();
  for (auto& k : key_set->all()) {
    auto entry = tier_json(k->tier().status());
    entry["requests"] = k->requests.load();
    entry["rate_limited"] = k->rate_limited.load();
    if (k->config().requests_per_minute > 0)
      entry["requests_per_minute"] = k->config().requests_per_minute;
    keys[k->name()] = std::move(entry);
  }
  // Tokens and spend, per key and per route, against their limits.
  auto now = front.now();
  auto wall = std::chrono::system_clock::now();
  json spend = {{"keys", json::object()}, {"routes", json::object()}};
  for (auto& k : key_set->all())
    if (k->spend())
      spend["keys"][k->name()] = spend_json(*k->spend(), now, wall, shared);
  for (auto& [path, scope] : front.spend()->routes())
    spend["routes"][path] = spend_json(*scope, now, wall, shared);
  // With Redis the limits are counted there: the figures above are Redis's
  // (`counted_in`), or, when it did not answer, what this node counted
  // alone (while Redis was down with "open").
  if (auto& shared = front.shared_spend) {
    auto& c = shared->counters();
    spend["shared"] = {
        {"backend", "redis"},
        {"down", shared->down()},
        {"when_down", shared->open_when_down() ? "open" : "closed"},
        {"held_here", shared->held()},
        {"reserves", c.reserves.load()},
        {"refusals", c.refusals.load()},
        {"errors", c.errors.load()},
        {"settle_retries", c.settle_retries.load()},
        {"settle_dropped", c.settle_dropped.load()},
        {"lapsed", c.lapsed.load()}};
  }
  json connections = json::object();
  {
    std::lock_guard<std::mutex> guard{front.connections_mx};
    for (auto& [id, c] : front.connections) {
      auto entry = tier_json(c.tier.status());
      entry["key"] = c.key.empty() ? json(nullptr) : json(c.key);
      connections[std::to_string(id)] = std::move(entry);
    }
  }
  auto figures = front.metrics.read(slowest_calls_shown);
  json sources = json::array();
  std::map<std::string, std::string> broken;
  for (auto& [name, why] : front.rt.broken_sources())
    broken[name] = why;
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    auto t = s.tier->load();
    // A source whose actors died is never reported healthy.
    auto dead = broken.find(s.name);
    sources.push_back(
        {{"name", s.name},
         {"health", dead == broken.end() ? "ok" : "broken"},
         {"held_past_ejection_limit",
          front.rt.ejections().with([&](auto& l) { return l.held(s.name); })},
         {"broken_reason",
          dead == broken.end() ? json(nullptr) : json(dead->second)},
         {"breaker",
          {{"state", std::string{policy::to_string(b.state)}},
           {"generation", b.generation}}},
         {"aimd_limit", s.tier->cap()},
         {"in_flight", t.in_use},
         {"attempts_by_outcome", figures.attempts.count(s.name) > 0
                                     ? json(figures.attempts[s.name])
                                     : json::object()}});
    // The upstream's own limits as its answers said (SPEC §12).
    if (s.headroom) {
      // On the actors' clock (the governors' own): the steady clock.
      auto h = s.headroom->read(steady::now());
      auto known = [](const std::optional<uint64_t>& v) {
        return v ? json(*v) : json(nullptr);
      };
      sources.back()["provider_limits"] = {
          {"requests_left", known(h.requests_left)},
          {"tokens_left", known(h.tokens_left)},
          {"requests_in_flight", h.requests_in_flight},
          {"tokens_in_flight", h.tokens_in_flight},
          {"held_back", h.held_back}};
    }
    // An https:// source: whether it verifies (false is an explicit
    // opt-out an operator must see) and its handshakes.
    auto http = front.rt.find_http_source(s.name);
    if (http) // started by a governor on its own loop / in all
      sources.back()["attempts"] = {
          {"total", http->stats->attempts.load()},
          {"direct", http->stats->direct_attempts.load()}};
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
                        {"redis_errors", c->errors.load()},
                        {"asked", c->asked.load()},
                        {"woken", c->woken.load()}};
  auto fds = current_fd_usage();
  auto& k = front.counters;
  json relay = nullptr; // breakers not shared between nodes
  if (auto& r = front.rt.relay_stats())
    relay = {{"published", r->published.load()},
             {"applied", r->applied.load()},
             {"stale", r->stale.load()},
             {"confirmed", r->confirmed.load()},
             {"ignored", r->ignored.load()},
             {"resyncs", r->resyncs.load()},
             {"probes_claimed", r->probes_claimed.load()},
             {"probes_deferred", r->probes_deferred.load()},
             {"redis_errors", r->errors.load()}};
  // Each source list with a retry budget: a route, or one of its model
  // entries ("ROUTE model PATTERN"), as the ejection limits below.
  json budgets = json::object();
  for (auto& b : front.rt.retry_budgets())
    budgets[b.label] = {{"scope", b.scope},
                        {"active_calls", b.active},
                        {"retries_in_flight", b.retrying},
                        {"retries_allowed", b.allowed},
                        {"retries_refused", b.refused}};
  // Each source list with an ejection limit: how many of its sources are
  // out, how many may be, and which are kept in service past the limit.
  json ejection = json::object();
  auto limits = front.rt.ejections().with([](auto& l) { return l.routes(); });
  for (auto& e : limits)
    ejection[e.route] = {{"sources", e.sources},
                         {"ejected", e.ejected},
                         {"allowed", e.allowed},
                         {"held", e.held}};
  return {{"now_ms", wall_ms(std::chrono::system_clock::now())},
          {"started_ms", front.started_unix * 1000},
          {"config", config_json(front)},
          {"tiers", std::move(tiers)},
          {"retry_budgets", std::move(budgets)},
          {"spend", std::move(spend)},
          {"ejection_limits", std::move(ejection)},
          {"breaker_relay", std::move(relay)},
          {"calls", calls_json(figures)},
          {"connections", front.open_connections.load()},
          {"calls_in_flight", front.in_flight.load()},
          {"sources", std::move(sources)},
          {"scopes", std::move(scopes)},
          {"limits",
           {{"fd_limit", fds.limit},
            {"fds_open", fds.open},
            {"max_connections", front.settings.max_connections},
            {"connection_cap", front.client_cap},
            {"fd_reserve", front.fd_reserve},
            {"admin_max_connections", front.admin_cap},
            {"event_subscribers", front.events.size()},
            {"max_event_subscribers", front.events.max_subscribers()},
            {"sessions_kept", front.rt.kept_session_count()}}},
          {"refused",
           {{"connections", k.connections_refused.load()},
            {"accept_errors", k.accept_errors.load()},
            {"idle_connections_shed", k.connections_shed.load()},
            {"access_log_lines_suppressed", front.access.suppressed_total()},
            {"access_log_lines_dropped", front.access.dropped_total()},
            {"requests", k.requests_refused.load()},
            {"stream_clients_dropped", k.clients_dropped.load()},
            {"handler_errors", k.handler_errors.load()}}},
          {"model_lists",
           {{"built", front.model_lists.builds()},
            {"kept", front.model_lists.size()}}},
          {"loops", loops_status(front)},
          {"mcp", mcp_status(front)}};
}

std::string metrics_text(front_state& front) {
  prom_text out;
  front.metrics.write(out);
  write_spend_gauges(out, front);
  write_mcp_metrics(out, front);
  const auto& sources = front.rt.sources();
  out.family("sluice_breaker_state", "gauge",
             "Breaker state per source (0 closed, 1 open, 2 half_open).");
  for (auto& s : sources)
    out.sample("sluice_breaker_state", {{"source", s.name}},
               static_cast<int>(s.breaker.mirror->load().state));
  out.family("sluice_breaker_generation", "gauge",
             "Breaker generation (transitions + 1).");
  for (auto& s : sources)
    out.sample("sluice_breaker_generation", {{"source", s.name}},
               s.breaker.mirror->load().generation);
  out.family("sluice_source_limit", "gauge", "AIMD concurrency limit.");
  for (auto& s : sources)
    out.sample("sluice_source_limit", {{"source", s.name}}, s.tier->cap());
  out.family("sluice_tier_in_use", "gauge", "Permits in use.");
  out.sample("sluice_tier_in_use", {{"tier", "global"}},
             front.rt.tiers().global().status().in_use);
  out.family("sluice_calls_in_flight", "gauge", "Calls in flight.");
  out.sample("sluice_calls_in_flight", {}, front.in_flight.load());
  out.family("sluice_connections_open", "gauge", "Client connections open.");
  out.sample("sluice_connections_open", {}, front.open_connections.load());
  out.family("sluice_stream_clients_dropped_total", "counter",
             "Stream clients dropped (gone or too slow).");
  out.sample("sluice_stream_clients_dropped_total", {},
             front.counters.clients_dropped.load());
  write_process_metrics(out, read_process_figures());
  return out.take();
}

std::string breaker_snapshot_frame(front_state& front) {
  json breakers = json::array();
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    breakers.push_back({{"source", s.name},
                        {"state", std::string{policy::to_string(b.state)}},
                        {"generation", b.generation}});
  }
  // The recent transitions are spliced in as they were published.
  auto ping_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     front.settings.events_ping)
                     .count();
  auto text = json_text(json{{"breakers", std::move(breakers)},
                             {"started_ms", front.started_unix * 1000},
                             {"ping_ms", ping_ms}});
  text.pop_back(); // the object's closing brace
  return "event: snapshot\ndata: " + text +
         ",\"history\":" + front.transitions.json_array(front.now()) + "}\n\n";
}

std::string breaker_event_json(const breaker_event& ev) {
  // Wall-clock time of the transition (the event carries steady time).
  auto wall = std::chrono::system_clock::now() -
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  steady::now() - ev.at);
  auto ms = wall_ms(wall);
  json data{{"source", ev.source},
            {"from", std::string{policy::to_string(ev.from)}},
            {"to", std::string{policy::to_string(ev.to)}},
            {"generation", ev.generation},
            {"at_ms", ms}};
  return json_text(data);
}

std::string breaker_event_frame(const std::string& json) {
  return "event: breaker\ndata: " + json + "\n\n";
}

} // namespace sluice::node
