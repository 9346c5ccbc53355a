#include "sluice/runtime/runtime.hpp"

#include <map>
#include <mutex>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/mcp/mcp_source.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/remote_source.hpp"
#include "sluice/runtime/source_lifetime.hpp"
#include "sluice/runtime/sources.hpp"

namespace sluice {

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
  validate_source_settings(key, settings);
  std::unique_lock<std::shared_mutex> guard{mx_};
  bool taken = staging_ ? staged_.count(name) != 0 ||
                              (sources_.count(name) != 0 &&
                               staging_free_.count(name) == 0)
                        : sources_.count(name) != 0;
  if (taken)
    throw config_error(key, "a source with this name already exists");
  auto handle = make_source(sys_, name, std::move(actor), settings.breaker,
                            settings.aimd, settings.quota, self_timed,
                            ejections_, settings.obey_rate_limit_headers);
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

std::shared_ptr<const mcp_server_view>
runtime::add_mcp_server(const mcp_server_settings& server,
                        const source_settings& settings,
                        const std::string& kind) {
  auto key = "mcp.servers." + server.name;
  with_key_prefix(key, [&] { validate(server); });
  auto name = "mcp:" + server.name;
  auto s = spawn_mcp_source(sys_, server);
  try {
    // Self-timed: it answers `timeout` itself (idle and call timeouts) and
    // drops an attempt on `cancel_atom`, telling the server.
    add_source(name, s.actor, settings, true);
  } catch (...) {
    caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
    throw;
  }
  std::unique_lock<std::shared_mutex> guard{mx_};
  if (staging_) { // a reload: its plan has the route (mcp_route)
    staged_mcp_[server.name] = s.view;
    return s.view;
  }
  guard.unlock();
  add_route(mcp_route(server.name, kind));
  guard.lock();
  mcp_servers_[server.name] = s.view;
  return s.view;
}

route_config mcp_route(const std::string& server, const std::string& kind) {
  route_config r;
  r.name = "mcp:" + server;
  r.kind = kind;
  r.sources = {r.name};
  return r;
}

std::shared_ptr<const mcp_server_view>
runtime::mcp_server(const std::string& name) const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  auto i = mcp_servers_.find(name);
  return i == mcp_servers_.end() ? nullptr : i->second;
}

std::vector<std::shared_ptr<const mcp_server_view>>
runtime::mcp_servers() const {
  std::shared_lock<std::shared_mutex> guard{mx_};
  std::vector<std::shared_ptr<const mcp_server_view>> out;
  for (auto& kv : mcp_servers_)
    out.push_back(kv.second);
  return out;
}

} // namespace sluice
