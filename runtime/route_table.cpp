#include "sluice/runtime/runtime.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include <caf/send.hpp>

#include "sluice/actors/breaker.hpp"
#include "sluice/actors/source_gate.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/config_diff.hpp"
#include "sluice/runtime/route_rules.hpp"
#include "sluice/runtime/source_lifetime.hpp"
#include "sluice/runtime/sources.hpp"

namespace sluice {

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
    const std::function<const source_handle*(const std::string&)>& find) const {
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
      if (auto life =
              std::static_pointer_cast<const source_lifetime>(h.lifetime)) {
        life->retired->store(true, std::memory_order_release);
        // Never live: the name in the ledger is the running source's.
        if (h.breaker.ejection_seat)
          h.breaker.ejection_seat->retire(false);
      }
    staged_.clear(); // the lifetimes stop the actors
    tuned_.clear();
    staged_http_.clear();
    staged_mcp_.clear();
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
      validate_source_settings(key, settings);
      std::unique_lock<std::shared_mutex> guard{mx_};
      auto i = sources_.find(name);
      if (i == sources_.end())
        throw config_error(key, "no source of this name runs to tune");
      auto h = i->second;
      h.quota = settings.quota ? std::make_shared<source_quota>(
                                     *settings.quota, sys_.clock().now())
                               : nullptr;
      // Kept when still obeyed: what the upstream said, and the calls in
      // flight counted against it, stay true across the reload.
      if (!settings.obey_rate_limit_headers)
        h.headroom = nullptr;
      else if (!h.headroom)
        h.headroom = std::make_shared<source_headroom>();
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
      // Whether it holds a source this reload retires or tunes.
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
      bool running = old != routes_.end();
      if (policy::keeps_built_route(keep.count(r.name) != 0, running,
                                    running && holds_retired(old->second)))
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
    if (name.rfind("mcp:", 0) == 0) // its server ends as the source drains
      mcp_servers_.erase(name.substr(4));
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
  for (auto& [name, v] : staged_mcp_)
    mcp_servers_.insert_or_assign(name, std::move(v));
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
  staged_mcp_.clear();
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
  retired_.erase(
      std::remove_if(retired_.begin(), retired_.end(),
                     [](const auto& p) { return p.second.expired(); }),
      retired_.end());
}

} // namespace sluice
