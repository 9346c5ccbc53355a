#include "sluice/runtime/runtime.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/cluster_tier.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/actors/scope_backend.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/redis/breaker_relay.hpp"
#include "sluice/runtime/remote_source.hpp"
#include "sluice/runtime/redis/lease_pool.hpp"
#include "sluice/runtime/redis/scope_backend.hpp"
#include "sluice/runtime/route_rules.hpp"
#include "sluice/runtime/source_lifetime.hpp"
#include "sluice/runtime/sources.hpp"

namespace sluice {

namespace {

/// On the loop scheduler: how long the destructor waits for its built-in
/// sources to stop (all of them).
constexpr auto source_stop_wait = std::chrono::milliseconds{5000};

} // namespace

// -- call_handle --------------------------------------------------------------

void call_handle::cancel() const {
  if (governor_)
    caf::anon_send_exit(governor_, caf::exit_reason::kill);
}

// -- runtime_config -----------------------------------------------------------

void validate_backend(const runtime_config& cfg) {
  if (cfg.progress_ttl < std::chrono::seconds{1})
    throw field_error("progress_ttl", "must be at least 1 s");
  if (cfg.lease_ttl < min_lease_ttl)
    throw field_error("lease_ttl", "must be at least 100 ms");
  if (cfg.spend_reservation_ttl < std::chrono::seconds{1} ||
      cfg.spend_reservation_ttl > std::chrono::hours{1})
    throw field_error("spend_reservation_ttl",
                      "must be in [1 s, 1 h] (renewed every third of it "
                      "while a call runs)");
  if (cfg.cluster_global_cap != 0) {
    if (!cfg.redis)
      throw field_error("cluster_global_cap",
                        "needs the redis backend (type = \"redis\")");
    validate_lease_limits(cfg.cluster_global_cap, cfg.lease_ttl);
  }
}

std::map<std::string, policy::call_policy> runtime_config::default_kinds() {
  policy::call_policy chat;
  policy::call_policy embeddings;
  embeddings.rate_limit_spends_retry = true;
  embeddings.attempt_timeout = std::chrono::seconds{60};
  // An agent's tool call (MCP `tools/call`, SPEC §13): one attempt may run
  // long while the server reports progress (its own `idle_timeout_s` judges
  // silence); a retry, where it is safe at all, comes soon.
  policy::call_policy tool;
  tool.attempt_timeout = std::chrono::seconds{600};
  tool.stall_window = std::chrono::seconds{60};
  tool.backoff.base = std::chrono::milliseconds{500};
  tool.backoff.cap = std::chrono::seconds{10};
  tool.poll_interval = std::chrono::milliseconds{500};
  return {{"chat", chat}, {"embeddings", embeddings}, {"tool", tool}};
}

// -- runtime ------------------------------------------------------------------

namespace {

// Every check of the facade's own settings, before anything is spawned: a
// bad kind or Redis setting must not leave a backend, cluster tier or relay
// running behind the exception.
runtime_config checked(runtime_config cfg) {
  if (cfg.kinds.empty())
    throw config_error("kinds", "needs at least one call kind");
  for (auto& kind : cfg.kinds)
    with_key_prefix("kinds." + kind.first, [&] { validate(kind.second); });
  with_key_prefix("admission", [&] { validate(cfg.admission); });
  if (cfg.redis)
    with_key_prefix("backend", [&] { validate(*cfg.redis); });
  with_key_prefix("backend", [&] { validate_backend(cfg); });
  return cfg;
}

caf::actor make_backend(caf::actor_system& sys, const runtime_config& cfg) {
  if (!cfg.redis)
    return spawn_local_scope_backend(sys);
  return spawn_redis_scope_backend(sys, *cfg.redis, cfg.progress_ttl);
}

caf::actor make_cluster_tier(caf::actor_system& sys, const runtime_config& cfg,
                             std::shared_ptr<cluster_tier_stats>& stats) {
  if (cfg.cluster_global_cap == 0)
    return {};
  auto store = make_redis_lease_store(sys, *cfg.redis, "global",
                                      cfg.cluster_global_cap, cfg.lease_ttl);
  stats = std::make_shared<cluster_tier_stats>();
  // Detached: destroying the Redis store joins its thread, never on a CAF
  // worker.
  return spawn_cluster_tier(sys, cluster_tier_config{}, std::move(store), stats,
                            true);
}

} // namespace

runtime::runtime(caf::actor_system& sys, runtime_config cfg)
    : sys_(sys)
    , cfg_(checked(std::move(cfg)))
    , tiers_(sys, cfg_.admission)
    , embedded_connection_(tiers_.new_connection())
    , backend_(make_backend(sys, cfg_))
    , cluster_(make_cluster_tier(sys, cfg_, cluster_stats_))
    , relay_stats_(cfg_.redis && cfg_.share_breakers
                       ? std::make_shared<breaker_relay_stats>()
                       : nullptr)
    , relay_(relay_stats_ ? spawn_breaker_relay(sys, *cfg_.redis, relay_stats_)
                          : caf::actor{})
    , next_seed_(cfg_.seed != 0 ? cfg_.seed : std::random_device{}())
    , health_(std::make_shared<actor_health>()) {
  // nop
}

runtime::~runtime() {
  health_->stopping.store(true, std::memory_order_release);
  std::unique_lock<std::shared_mutex> guard{mx_};
  auto stop = [](const auto& a) {
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  };
  std::vector<caf::actor> ours;
  for (auto& [name, s] : sources_) {
    if (s.self_timed) { // a built-in source: ours
      stop(s.actor);
      ours.push_back(caf::actor_cast<caf::actor>(s.actor));
    }
    stop(s.breaker.actor);
    stop(s.gate);
  }
  for (auto& a : owned_)
    stop(a);
  // Sources a reload took out that still serve calls: waited for as well.
  for (auto& [name, weak] : retired_)
    if (auto life = weak.lock()) {
      life->stop();
      ours.insert(ours.end(), life->actors.begin(), life->actors.end());
    }
  stop(backend_);
  if (cluster_)
    stop(cluster_);
  if (relay_)
    stop(relay_);
  guard.unlock(); // a loop's handler may take the lock while we wait
  // On the loop scheduler, a built-in source's connections live on the
  // loops: wait until each source has stopped (on its way out it posts the
  // close of its clients to their loops, which still run), so they do not
  // wait for the loops' own destruction. Not on a loop's thread (it would
  // wait for itself), and never under CAF's testing scheduler. MCP servers'
  // sources are waited for on any scheduler: each ends its server (a
  // child's SIGTERM, then SIGKILL) on its way out, and a node that exited
  // first would leave the child running.
  bool has_mcp = !mcp_servers_.empty();
  if ((loop_scheduler::of(sys_) != nullptr || has_mcp) && !ours.empty()) {
    assert_not_on_loop("~runtime (waits for its sources to stop)");
    if (on_loop_thread())
      return;
    try {
      caf::scoped_actor self{sys_};
      for (auto& a : ours)
        self->monitor(a);
      auto until = std::chrono::steady_clock::now() + source_stop_wait;
      for (size_t down = 0; down < ours.size(); ++down) {
        bool late = false;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        self->receive(
            [](const caf::down_msg&) {},
            caf::after(std::max(left, std::chrono::milliseconds{1})) >>
                [&late] { late = true; });
        if (late) {
          logger().warn("runtime: {} built-in source(s) did not stop within "
                        "{} ms",
                        ours.size() - down, source_stop_wait.count());
          break;
        }
      }
    } catch (const std::exception& e) {
      logger().warn("runtime: waiting for the sources to stop failed: {}",
                    e.what());
    }
  }
}

std::vector<std::string> runtime::draining_sources() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<std::string> out;
  for (auto& [name, weak] : retired_)
    if (!weak.expired())
      out.push_back(name);
  return out;
}

route_match runtime::find_route(const std::string& route,
                                const std::string& model) const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  auto i = routes_.find(route);
  if (i == routes_.end())
    return {nullptr, route_miss::no_route};
  auto& e = i->second;
  if (!model.empty())
    if (auto k = e.rules.match(model))
      return {e.by_model[*k], route_miss::none};
  if (e.fallback)
    return {e.fallback, route_miss::none};
  return {nullptr, model.empty() ? route_miss::model_required
                                 : route_miss::model_not_found};
}

std::vector<std::string> runtime::models() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<std::string> out;
  for (auto& name : route_order_)
    for (auto& m : routes_.at(name).rules.exact_names())
      if (std::find(out.begin(), out.end(), m) == out.end())
        out.push_back(m);
  return out;
}

std::shared_ptr<const route_plan>
runtime::route(const call_request& request) const {
  auto m = find_route(request.route, request.model);
  switch (m.miss) {
  case route_miss::none:
    return m.plan;
  case route_miss::no_route:
    throw std::invalid_argument("unknown route '" + request.route + "'");
  case route_miss::model_required:
    throw std::invalid_argument("route '" + request.route +
                                "' needs the call's model");
  case route_miss::model_not_found:
    break;
  }
  throw std::invalid_argument("route '" + request.route +
                              "' serves no model '" + request.model + "'");
}

std::vector<std::pair<std::string, tier_status>>
runtime::live_sessions() const {
  std::vector<std::pair<std::string, tier_status>> out;
  {
    std::lock_guard<std::mutex> guard{sessions_mx_};
    sessions_.for_each([&](const std::string& id, const tier_handle& t) {
      auto s = t.status();
      if (s.in_use > 0 || s.waiting > 0)
        out.emplace_back(id, s);
    });
  }
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

std::vector<runtime::budget_status> runtime::retry_budgets() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<budget_status> out;
  auto add = [&](const std::shared_ptr<const route_plan>& plan) {
    if (plan && plan->retry_budget) {
      auto s = plan->retry_budget->load();
      out.push_back({plan->label, plan->scope, s.active, s.retrying,
                     plan->retry_budget->allowed(s.active), s.refused});
    }
  };
  for (auto& name : route_order_) {
    auto& entry = routes_.at(name);
    add(entry.fallback);
    for (auto& plan : entry.by_model)
      add(plan);
  }
  return out;
}

std::vector<std::string> runtime::scopes() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<std::string> out;
  auto add = [&](const std::shared_ptr<const route_plan>& plan) {
    if (plan && std::find(out.begin(), out.end(), plan->scope) == out.end())
      out.push_back(plan->scope);
  };
  for (auto& [name, entry] : routes_) {
    add(entry.fallback);
    for (auto& plan : entry.by_model)
      add(plan);
  }
  return out;
}

tier_handle runtime::session(const std::string& id) {
  auto now = sys_.clock().now();
  std::lock_guard<std::mutex> guard{sessions_mx_};
  auto idle = [](const tier_handle& t) {
    auto s = t.status();
    return s.in_use == 0 && s.waiting == 0;
  };
  // Sessions idle past the TTL go here, at most once a second: the runtime
  // has no timer of its own. NOTE: a runtime no longer called keeps its
  // last idle sessions (at most max_kept_sessions tiers).
  if (now - last_sweep_ >= std::chrono::seconds{1}) {
    last_sweep_ = now;
    sessions_.sweep(now, idle);
  }
  return sessions_.use(
      id, now, [this] { return tiers_.new_session(); }, idle);
}

size_t runtime::kept_session_count() const {
  std::lock_guard<std::mutex> guard{sessions_mx_};
  return sessions_.size();
}

caf::actor runtime::spawn_call(call_request request,
                               const call_options& options) {
  return spawn_governor(sys_,
                        make_governor_config(std::move(request), options, {}));
}

governor_config
runtime::make_governor_config(call_request request, const call_options& options,
                              std::function<void(call_result)> done) {
  governor_config g;
  g.on_done = std::move(done);
  if (g.on_done)
    g.on_chunk = options.on_chunk;
  g.route = route(request);
  g.admission = tiers_.path(options.session_tier ? *options.session_tier
                                                 : session(options.session),
                            options.connection.value_or(embedded_connection_));
  g.admission.group = options.session_group;
  g.wait_timeout = cfg_.admission.wait_timeout;
  g.cluster = cluster_;
  g.request = std::move(request);
  g.seed = next_seed_.fetch_add(1, std::memory_order_relaxed);
  return g;
}

call_handle runtime::call(call_request request,
                          std::function<void(call_result)> done,
                          const call_options& options) {
  // The governor calls back itself: no waiting actor per call, and no
  // `call_atom` to start it.
  auto cfg = make_governor_config(std::move(request), options, std::move(done));
  cfg.start_at_once = true;
  return call_handle{spawn_governor(sys_, std::move(cfg))};
}

std::future<call_result> runtime::call(call_request request,
                                       const call_options& options) {
  if (request.stream)
    throw std::invalid_argument("a streamed call needs the callback form of "
                                "runtime::call (call_options::on_chunk)");
  auto promise = std::make_shared<std::promise<call_result>>();
  auto result = promise->get_future();
  call(
      std::move(request),
      [promise](call_result r) { promise->set_value(std::move(r)); }, options);
  return result;
}

bool runtime::has_route(const std::string& name) const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  return routes_.count(name) != 0;
}

source_handle runtime::source(const std::string& name) const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  return sources_.at(name);
}

std::optional<http_source>
runtime::find_http_source(const std::string& name) const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  auto i = http_sources_.find(name);
  if (i == http_sources_.end())
    return std::nullopt;
  return i->second;
}

std::vector<source_handle> runtime::sources() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<source_handle> out;
  for (auto& [name, s] : sources_)
    out.push_back(s);
  return out;
}

} // namespace sluice
