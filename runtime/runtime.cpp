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
#include "sluice/runtime/sources.hpp"

namespace sluice {

// -- actor_health -------------------------------------------------------------

struct runtime::actor_health {
  /// Set by ~runtime before it stops its actors: their exits then are ours.
  std::atomic<bool> stopping{false};
  /// Whether `broken` holds anything (the lock-free fast path).
  std::atomic<bool> any{false};
  mutable std::mutex mx;
  /// Source name -> what ended its actor (first death only).
  std::map<std::string, std::string> broken;

  void died(const std::string& source, const char* role,
            const caf::error& reason, const std::atomic<bool>* retired) {
    if (stopping.load(std::memory_order_acquire) ||
        (retired != nullptr && retired->load(std::memory_order_acquire)))
      return;
    auto what = std::string{role} + ": " +
                (reason ? caf::to_string(reason) : std::string{"exited"});
    {
      std::lock_guard<std::mutex> guard{mx};
      if (!broken.emplace(source, what).second)
        return;
    }
    any.store(true, std::memory_order_release);
    // Once per source: no flood to limit.
    logger().error("source {} is broken: its {} actor terminated ({})", source,
                   role, what);
  }

  /// Watches `a` (which may already be dead: then the functor runs now).
  /// Once `retired` is set (a reload took the source out), its end is
  /// ours too.
  void watch(const std::shared_ptr<actor_health>& self, const caf::actor& a,
             const std::string& source, const char* role,
             std::shared_ptr<const std::atomic<bool>> retired = nullptr) {
    if (!a)
      return;
    auto ptr = caf::actor_cast<caf::abstract_actor*>(a);
    ptr->attach_functor(
        [self, source, role, retired](const caf::error& reason) {
          self->died(source, role, reason, retired.get());
        });
  }
};

// -- source_lifetime ----------------------------------------------------------

/// What a source handle's `lifetime` points at: the actors the runtime
/// made for the source. Once retired by a reload, they stop with the last
/// handle (the last call that started before the reload).
struct runtime::source_lifetime {
  std::shared_ptr<std::atomic<bool>> retired =
      std::make_shared<std::atomic<bool>>(false);
  std::vector<caf::actor> actors;
  /// A remote source's link (null for the others): while it cannot serve,
  /// the source is reported broken.
  std::shared_ptr<const remote_link_health> link;

  void stop() const {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  ~source_lifetime() {
    if (retired->load(std::memory_order_acquire))
      stop();
  }
};

namespace {

/// On the loop scheduler: how long the destructor waits for its built-in
/// sources to stop (all of them).
constexpr auto source_stop_wait = std::chrono::milliseconds{5000};

// Runs `f`; turns its `std::invalid_argument("field: problem")` into a
// `config_error` for the key `prefix.field`.
template <class F>
void with_key_prefix(const std::string& prefix, F f) {
  try {
    f();
  } catch (const config_error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    auto [field, problem] = read_field_problem(e);
    throw config_error(field.empty() ? prefix : prefix + "." + field, problem);
  }
}

// The settings a source has around its actor (breaker, AIMD, quota),
// each refused under its key `key.FIELD...` (at its start and when a
// reload tunes it).
void validate_settings(const std::string& key, const source_settings& s) {
  with_key_prefix(key + ".breaker", [&] { validate(s.breaker); });
  with_key_prefix(key + ".aimd", [&] { validate(s.aimd); });
  if (s.quota)
    with_key_prefix(key + ".quota", [&] { validate(*s.quota); });
}

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
  return {{"chat", chat}, {"embeddings", embeddings}};
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
  // wait for itself), and never under CAF's testing scheduler.
  if (loop_scheduler::of(sys_) != nullptr && !ours.empty()) {
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

void runtime::add_source(const std::string& name, source_actor actor,
                         const source_settings& settings) {
  add_source(name, std::move(actor), settings, false);
}

void runtime::add_remote_source(const std::string& name,
                                const remote_source_config& remote,
                                const source_settings& settings) {
  with_key_prefix("sources." + name, [&] { validate(remote); });
  auto link = std::make_shared<remote_link_health>();
  auto actor = spawn_remote_source(sys_, remote, link);
  try {
    // A connector that died is reported broken, not left as a source that
    // fails every attempt; so is one whose link is down.
    add_source(name, actor, settings, false, {}, true, link);
  } catch (...) {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    throw;
  }
  auto connector = caf::actor_cast<caf::actor>(std::move(actor));
  std::unique_lock<std::shared_mutex> guard{mx_};
  (staging_ ? staged_owned_ : owned_).push_back(std::move(connector));
}

void runtime::add_source(const std::string& name, source_actor actor,
                         const source_settings& settings, bool self_timed,
                         std::weak_ptr<direct_attempts> direct, bool own_actor,
                         std::shared_ptr<const remote_link_health> link) {
  auto key = "sources." + name;
  if (name.empty())
    throw config_error("sources", "a source needs a name");
  validate_settings(key, settings);
  std::unique_lock<std::shared_mutex> guard{mx_};
  bool taken = staging_ ? staged_.count(name) != 0 ||
                              (sources_.count(name) != 0 &&
                               staging_free_.count(name) == 0)
                        : sources_.count(name) != 0;
  if (taken)
    throw config_error(key, "a source with this name already exists");
  auto handle = make_source(sys_, name, std::move(actor), settings.breaker,
                            settings.aimd, settings.quota, self_timed,
                            ejections_);
  handle.direct = std::move(direct);
  if (!settings.model_names.empty())
    handle.model_names =
        std::make_shared<const std::map<std::string, std::string>>(
            settings.model_names);
  auto life = std::make_shared<source_lifetime>();
  life->actors = {handle.breaker.actor, handle.gate};
  life->link = std::move(link);
  if (self_timed || own_actor)
    life->actors.push_back(caf::actor_cast<caf::actor>(handle.actor));
  // An actor of ours that dies is never reported healthy (its functor runs
  // at once if it is already dead).
  health_->watch(health_, handle.breaker.actor, name, "breaker", life->retired);
  health_->watch(health_, handle.gate, name, "gate", life->retired);
  if (self_timed || own_actor)
    health_->watch(health_, caf::actor_cast<caf::actor>(handle.actor), name,
                   "source", life->retired);
  handle.lifetime = std::move(life);
  if (staging_) { // told to the relay when the update commits
    staged_.emplace(name, std::move(handle));
    return;
  }
  if (relay_)
    caf::anon_send(relay_, relay_watch_atom_v, name, handle.breaker.actor);
  sources_.emplace(name, std::move(handle));
}

bool runtime::broken(const std::string& name) const {
  if (!health_->any.load(std::memory_order_acquire))
    return false;
  std::lock_guard<std::mutex> guard{health_->mx};
  return health_->broken.count(name) != 0;
}

std::vector<std::pair<std::string, std::string>>
runtime::broken_sources() const {
  // Remote links first (under the runtime's lock, which is never taken
  // inside the health lock), then the dead actors, which win.
  std::map<std::string, std::string> all;
  {
    std::shared_lock<std::shared_mutex> guard{mx_};
    for (auto& [name, h] : sources_) {
      auto life = std::static_pointer_cast<const source_lifetime>(h.lifetime);
      if (!life || !life->link)
        continue;
      if (auto problem = life->link->problem())
        all[name] = "remote: " + *problem;
    }
  }
  std::lock_guard<std::mutex> guard{health_->mx};
  for (auto& [name, why] : health_->broken)
    all[name] = why;
  return {all.begin(), all.end()};
}

void runtime::check_started(duration timeout) const {
  assert_not_on_loop("runtime::check_started (waits for every source)");
  auto all = sources();
  caf::scoped_actor self{sys_};
  auto ask = [&](const caf::actor& a, const std::string& name, const char* role,
                 auto reply_type) {
    using reply = decltype(reply_type);
    self->request(a, timeout, status_atom_v)
        .receive([](const reply&) {},
                 [&](caf::error& err) { health_->died(name, role, err, nullptr); });
  };
  for (auto& s : all) {
    ask(s.breaker.actor, s.name, "breaker", breaker_status{});
    ask(s.gate, s.name, "gate", gate_status{});
  }
  // Dead actors only: a remote source not connected yet does not stop the
  // start (it connects in the background; its attempts fail over).
  std::lock_guard<std::mutex> guard{health_->mx};
  if (!health_->broken.empty())
    throw config_error("sources." + health_->broken.begin()->first,
                       "did not start (" + health_->broken.begin()->second +
                           ")");
}

simulated_source
runtime::add_simulated_source(const std::string& name, const sim_config& sim,
                              const source_settings& settings) {
  with_key_prefix("sources." + name + ".simulated", [&] { validate(sim); });
  auto s = spawn_simulated_source(sys_, sim);
  try {
    add_source(name, s.actor, settings, true);
  } catch (...) {
    caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
    throw;
  }
  return s;
}

http_source runtime::add_http_source(const std::string& name,
                                     const http_source_config& http,
                                     const source_settings& settings) {
  with_key_prefix("sources." + name, [&] { validate(http); });
  auto named = http;
  named.log_name = name;
  auto s = spawn_http_source(sys_, named);
  try {
    add_source(name, s.actor, settings, true, s.direct);
  } catch (...) {
    caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
    throw;
  }
  std::unique_lock<std::shared_mutex> guard{mx_};
  (staging_ ? staged_http_ : http_sources_).emplace(name, s);
  return s;
}

namespace {

// Names one model entry of a route in /status (its retry budget, its
// ejection limit).
std::string model_label(const std::string& route, const std::string& pattern) {
  return route + " model " + pattern;
}

// Registers `r`'s ejection limits. Each source list is limited apart, as
// each is a route's way to serve.
void add_limits(policy::ejection_ledger& l, const route_config& r) {
  if (!r.max_ejection_percent)
    return;
  if (!r.sources.empty())
    l.add_route(r.name, r.sources, *r.max_ejection_percent);
  for (auto& m : r.models)
    l.add_route(model_label(r.name, m.pattern), m.sources,
                *r.max_ejection_percent);
}

// Forgets the ejection limits of the route whose plans `fallback` and
// `by_model` are.
template <class Entry>
void remove_limits(policy::ejection_ledger& l, const Entry& e) {
  if (e.fallback)
    l.remove_route(e.fallback->label);
  for (auto& p : e.by_model)
    l.remove_route(p->label);
}

} // namespace

runtime::route_entry runtime::build_route(
    const route_config& r,
    const std::map<std::string, policy::call_policy>& kinds,
    const std::function<const source_handle*(const std::string&)>& find)
    const {
  auto key = "routes." + r.name;
  if (r.name.empty())
    throw config_error("routes", "a route needs a name");
  with_key_prefix(key, [&] {
    validate(
        r, [&](const std::string& k) { return kinds.count(k) != 0; },
        [&](const std::string& s) { return find(s) != nullptr; });
  });
  if (r.retry_budget)
    with_key_prefix(key + ".retry_budget",
                    [&] { policy::validate(*r.retry_budget); });
  if (r.max_ejection_percent)
    with_key_prefix(key, [&] {
      policy::validate_max_ejection_percent(*r.max_ejection_percent);
    });
  route_entry entry;
  for (size_t i = 0; i < r.models.size(); ++i) {
    auto& m = r.models[i];
    try {
      entry.rules.add(m.pattern, i);
    } catch (const std::invalid_argument& e) {
      throw config_error(key + ".models." + m.pattern, e.what());
    }
  }
  auto scope = r.scope.empty() ? r.name : r.scope;
  auto& policy = kinds.at(r.kind); // validated above
  auto make_plan = [&](const std::vector<std::string>& sources,
                       const std::vector<double>& weights,
                       std::string plan_scope, std::string label) {
    auto plan = std::make_shared<route_plan>();
    plan->name = r.name;
    plan->label = std::move(label);
    plan->scope = std::move(plan_scope);
    plan->weights = weights;
    plan->policy = policy;
    plan->backend = backend_;
    if (r.retry_budget)
      plan->retry_budget =
          std::make_shared<policy::retry_budget>(*r.retry_budget);
    for (auto& name : sources)
      plan->sources.push_back(*find(name)); // validated above
    return plan;
  };
  if (!r.sources.empty())
    entry.fallback = make_plan(r.sources, r.weights, scope, r.name);
  for (auto& m : r.models)
    entry.by_model.push_back(make_plan(m.sources, m.weights,
                                       scope + " model " + m.pattern,
                                       model_label(r.name, m.pattern)));
  return entry;
}

void runtime::add_route(route_config r) {
  std::unique_lock<std::shared_mutex> guard{mx_};
  auto entry = build_route(r, cfg_.kinds, [this](const std::string& name) {
    auto i = sources_.find(name);
    return i != sources_.end() ? &i->second : nullptr;
  });
  if (routes_.count(r.name) != 0)
    throw config_error("routes." + r.name,
                       "a route with this name already exists");
  ejections_->with([&](policy::ejection_ledger& l) { add_limits(l, r); });
  routes_.emplace(r.name, std::move(entry));
  route_order_.push_back(r.name);
  routes_version_.fetch_add(1, std::memory_order_acq_rel);
}

void runtime::update(const update_plan& plan,
                     const std::function<void()>& add_sources) {
  std::lock_guard<std::mutex> one_at_a_time{update_mx_};
  {
    std::unique_lock<std::shared_mutex> guard{mx_};
    staging_ = true;
    staging_free_ = {plan.retire.begin(), plan.retire.end()};
  }
  // Stops whatever the update built and leaves the runtime as it was.
  auto abort = [this] {
    std::unique_lock<std::shared_mutex> guard{mx_};
    for (auto& [name, h] : staged_)
      if (auto life = std::static_pointer_cast<const source_lifetime>(
              h.lifetime)) {
        life->retired->store(true, std::memory_order_release);
        // Never live: the name in the ledger is the running source's.
        if (h.breaker.ejection_seat)
          h.breaker.ejection_seat->retire(false);
      }
    staged_.clear(); // the lifetimes stop the actors
    tuned_.clear();
    staged_http_.clear();
    staged_owned_.clear();
    staging_free_.clear();
    staging_ = false;
  };
  std::map<std::string, route_entry> routes;
  try {
    // Tuned sources: their settings checked, their new handles made (the
    // actors are told at the commit).
    for (auto& [name, settings] : plan.tune) {
      auto key = "sources." + name;
      validate_settings(key, settings);
      std::unique_lock<std::shared_mutex> guard{mx_};
      auto i = sources_.find(name);
      if (i == sources_.end())
        throw config_error(key, "no source of this name runs to tune");
      auto h = i->second;
      h.quota = settings.quota ? std::make_shared<source_quota>(
                                     *settings.quota, sys_.clock().now())
                               : nullptr;
      h.model_names = nullptr;
      if (!settings.model_names.empty())
        h.model_names =
            std::make_shared<const std::map<std::string, std::string>>(
                settings.model_names);
      tuned_.insert_or_assign(name, std::move(h));
    }
    add_sources();
    std::shared_lock<std::shared_mutex> guard{mx_};
    auto find = [&](const std::string& name) -> const source_handle* {
      if (auto i = staged_.find(name); i != staged_.end())
        return &i->second;
      if (auto i = tuned_.find(name); i != tuned_.end())
        return &i->second;
      if (staging_free_.count(name) != 0)
        return nullptr;
      auto i = sources_.find(name);
      return i != sources_.end() ? &i->second : nullptr;
    };
    std::set<std::string> keep{plan.keep_routes.begin(),
                               plan.keep_routes.end()};
    for (auto& r : plan.routes) {
      if (routes.count(r.name) != 0)
        throw config_error("routes." + r.name,
                           "a route with this name already exists");
      auto old = routes_.find(r.name);
      // A kept route must not hold a retired source (its lifetime would
      // never end): then it is rebuilt whatever the caller said.
      auto holds_retired = [&](const route_entry& e) {
        auto in = [&](const std::shared_ptr<const route_plan>& p) {
          return p && std::any_of(p->sources.begin(), p->sources.end(),
                                  [&](const source_handle& h) {
                                    return staging_free_.count(h.name) != 0 ||
                                           tuned_.count(h.name) != 0;
                                  });
        };
        return in(e.fallback) ||
               std::any_of(e.by_model.begin(), e.by_model.end(), in);
      };
      if (keep.count(r.name) != 0 && old != routes_.end() &&
          !holds_retired(old->second))
        routes.emplace(r.name, old->second);
      else
        routes.emplace(r.name, build_route(r, plan.kinds, find));
    }
  } catch (...) {
    abort();
    throw;
  }
  // Commit: nothing below throws but allocation.
  std::unique_lock<std::shared_mutex> guard{mx_};
  std::vector<std::shared_ptr<shared_ejections::seat>> seats;
  for (auto& name : plan.retire) {
    auto i = sources_.find(name);
    if (i == sources_.end())
      continue;
    auto& h = i->second;
    seats.push_back(h.breaker.ejection_seat);
    // Draining, its breaker tells no one (the relay, /events) of what it
    // decides: the name is its successor's.
    retire_breaker(h.breaker.actor);
    if (auto life = std::const_pointer_cast<source_lifetime>(
            std::static_pointer_cast<const source_lifetime>(h.lifetime))) {
      life->retired->store(true, std::memory_order_release);
      retired_.emplace_back(name, life);
      // Its remote connector, if any, goes with the lifetime now.
      auto& acts = life->actors;
      owned_.erase(std::remove_if(owned_.begin(), owned_.end(),
                                  [&](const caf::actor& a) {
                                    return std::find(acts.begin(), acts.end(),
                                                     a) != acts.end();
                                  }),
                   owned_.end());
    }
    sources_.erase(i);
    http_sources_.erase(name);
  }
  {
    // A retired source's death is no news (its flag is set above, so its
    // actors report nothing more), and a replacement starts clean.
    std::lock_guard<std::mutex> health_guard{health_->mx};
    for (auto& name : plan.retire)
      health_->broken.erase(name);
    health_->any.store(!health_->broken.empty(), std::memory_order_release);
  }
  for (auto& [name, h] : staged_) {
    if (relay_)
      caf::anon_send(relay_, relay_watch_atom_v, name, h.breaker.actor);
    sources_.insert_or_assign(name, std::move(h));
  }
  for (auto& [name, h] : staged_http_)
    http_sources_.insert_or_assign(name, std::move(h));
  for (auto& [name, settings] : plan.tune) {
    auto i = tuned_.find(name);
    if (i == tuned_.end())
      continue;
    reconfigure_breaker(i->second.breaker.actor, settings.breaker);
    reconfigure_gate(i->second.gate, settings.aimd);
    sources_.insert_or_assign(name, std::move(i->second));
  }
  tuned_.clear();
  owned_.insert(owned_.end(), staged_owned_.begin(), staged_owned_.end());
  staged_.clear();
  staged_http_.clear();
  staged_owned_.clear();
  staging_free_.clear();
  staging_ = false;
  // The retired seats and the limits in one step: no breaker sees the
  // limits half swapped.
  ejections_->retire_and(seats, [&](policy::ejection_ledger& l) {
    for (auto& [name, e] : routes_)
      remove_limits(l, e);
    for (auto& r : plan.routes)
      add_limits(l, r);
  });
  routes_ = std::move(routes);
  route_order_.clear();
  for (auto& r : plan.routes)
    route_order_.push_back(r.name);
  routes_version_.fetch_add(1, std::memory_order_acq_rel);
  cfg_.kinds = plan.kinds;
  // Forget retired sources no call holds any more.
  retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                [](const auto& p) { return p.second.expired(); }),
                 retired_.end());
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
