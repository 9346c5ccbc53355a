#include "sluice/runtime/config_reload.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/runtime.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sluice/actors/log.hpp"
#include "sluice/runtime/config_error.hpp"

namespace sluice {

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

policy::source_prints source_prints(const file_config& cfg) {
  policy::source_prints out;
  for (auto& s : cfg.sources)
    out[s.name] = s.fingerprint;
  return out;
}

policy::fingerprints route_prints(const file_config& cfg) {
  policy::fingerprints out;
  for (auto& r : cfg.routes)
    out[r.route.name] = r.fingerprint;
  return out;
}

std::map<std::string, std::vector<std::string>>
route_sources(const file_config& cfg) {
  std::map<std::string, std::vector<std::string>> out;
  for (auto& r : cfg.routes) {
    auto& names = out[r.route.name];
    names = r.route.sources;
    for (auto& m : r.route.models)
      names.insert(names.end(), m.sources.begin(), m.sources.end());
  }
  return out;
}

// What a reload does to the MCP servers: the sources it retires (taken out,
// or replaced), the servers that run on as they are, and the summary.
struct mcp_plan {
  std::vector<std::string> retire;
  std::set<std::string> keep;
  policy::named_diff summary;
};

mcp_plan mcp_changes(const mcp_settings& running, const mcp_settings& next) {
  mcp_plan out;
  std::map<std::string, std::string> before;
  for (size_t i = 0; i < running.servers.size(); ++i)
    before[running.servers[i].name] =
        i < running.prints.size() ? running.prints[i] : std::string{};
  std::set<std::string> names;
  for (size_t i = 0; i < next.servers.size(); ++i) {
    auto& name = next.servers[i].name;
    names.insert(name);
    auto b = before.find(name);
    if (b == before.end()) {
      out.summary.added.push_back(name);
    } else if (b->second != next.prints[i]) {
      out.summary.replaced.push_back(name);
      out.retire.push_back("mcp:" + name);
    } else {
      out.keep.insert(name);
    }
  }
  for (auto& [name, print] : before)
    if (names.count(name) == 0) {
      out.summary.removed.push_back(name);
      out.retire.push_back("mcp:" + name);
    }
  return out;
}

// "+a ~b *c -d" (added, replaced, tuned, removed); "unchanged" if none.
std::string summary(const policy::named_diff& d) {
  std::string out;
  auto list = [&out](char sign, const std::vector<std::string>& names) {
    for (auto& n : names) {
      if (!out.empty())
        out += ' ';
      out += sign;
      out += n;
    }
  };
  list('+', d.added);
  list('~', d.replaced);
  list('*', d.tuned);
  list('-', d.removed);
  return out.empty() ? "unchanged" : out;
}

} // namespace

config_reloader::config_reloader(runtime& rt, file_config running,
                                 std::string path)
    : rt_(rt)
    , path_(std::move(path))
    , running_(std::move(running)) {
  status_.path = path_;
  status_.loaded_unix = unix_now();
}

void config_reloader::add_check(const void* owner,
                                std::function<void(const file_config&)> check) {
  std::lock_guard<std::mutex> guard{mx_};
  checks_.emplace_back(owner, std::move(check));
}

void config_reloader::on_applied(
    const void* owner, std::function<void(const file_config&)> listener) {
  std::lock_guard<std::mutex> guard{mx_};
  listeners_.emplace_back(owner, std::move(listener));
}

void config_reloader::forget(const void* owner) {
  std::lock_guard<std::mutex> guard{mx_};
  auto mine = [owner](const hook& h) { return h.first == owner; };
  checks_.erase(std::remove_if(checks_.begin(), checks_.end(), mine),
                checks_.end());
  listeners_.erase(std::remove_if(listeners_.begin(), listeners_.end(), mine),
                   listeners_.end());
}

reload_status config_reloader::status() const {
  std::lock_guard<std::mutex> guard{status_mx_};
  return status_;
}

reload_outcome config_reloader::refused(const std::string& trigger,
                                        std::string error) {
  std::lock_guard<std::mutex> guard{status_mx_};
  reload_outcome out;
  out.generation = status_.generation;
  out.error = std::move(error);
  ++status_.failed;
  status_.last_error = out.error;
  status_.last_error_unix = unix_now();
  logger().error("config reload ({}) refused, still running generation "
                 "{}: {}: {}",
                 trigger, status_.generation,
                 path_.empty() ? "(default)" : path_, out.error);
  return out;
}

reload_outcome config_reloader::reload(const std::string& trigger) {
  // Held from the read to the end: a reload never applies a file older
  // than one applied before it.
  std::lock_guard<std::mutex> guard{mx_};
  file_config next;
  try {
    if (path_.empty())
      throw config_error("file", "the node runs on the embedded default "
                                 "config; start it with --config FILE to "
                                 "reload one");
    next = load_config_file(path_);
  } catch (const std::exception& e) {
    return refused(trigger, e.what());
  } catch (...) {
    return refused(trigger, "reading the file failed");
  }
  return apply_locked(std::move(next), trigger);
}

reload_outcome config_reloader::apply(file_config next,
                                      const std::string& trigger) {
  std::lock_guard<std::mutex> guard{mx_};
  return apply_locked(std::move(next), trigger);
}

reload_outcome config_reloader::apply_locked(file_config next,
                                             const std::string& trigger) {
  reload_outcome out;
  auto origin = path_.empty() ? std::string{"(default)"} : path_;
  try {
    for (auto& [owner, check] : checks_)
      check(next);
    out.diff = policy::plan_reload(source_prints(running_), source_prints(next),
                                   route_prints(running_), route_prints(next),
                                   route_sources(next));
    runtime::update_plan plan;
    plan.kinds = next.runtime.kinds;
    auto& ds = out.diff.sources;
    plan.retire = ds.removed;
    plan.retire.insert(plan.retire.end(), ds.replaced.begin(),
                       ds.replaced.end());
    for (auto& r : next.routes)
      plan.routes.push_back(r.route);
    plan.keep_routes = out.diff.routes.kept;
    // The tool servers: one whose table changed is started again (its old
    // source drains, and its server ends with it), one taken out ends
    // once its calls did; the others run on.
    auto mcp = mcp_changes(running_.mcp, next.mcp);
    plan.retire.insert(plan.retire.end(), mcp.retire.begin(),
                       mcp.retire.end());
    for (auto& m : next.mcp.servers) {
      plan.routes.push_back(mcp_route(m.name, next.mcp.kind));
      if (mcp.keep.count(m.name) != 0 &&
          next.mcp.route_print == running_.mcp.route_print)
        plan.keep_routes.push_back("mcp:" + m.name);
    }
    for (auto& s : next.sources)
      if (std::find(ds.tuned.begin(), ds.tuned.end(), s.name) != ds.tuned.end())
        plan.tune.emplace_back(s.name, s.settings);
    std::set<std::string> build{ds.added.begin(), ds.added.end()};
    build.insert(ds.replaced.begin(), ds.replaced.end());
    rt_.update(plan, [&] {
      for (auto& s : next.sources)
        if (build.count(s.name) != 0)
          add_declared_source(rt_, s);
      for (size_t i = 0; i < next.mcp.servers.size(); ++i)
        if (mcp.keep.count(next.mcp.servers[i].name) == 0)
          rt_.add_mcp_server(next.mcp.servers[i], next.mcp.settings[i],
                             next.mcp.kind);
    });
    out.mcp = std::move(mcp.summary);
  } catch (const std::exception& e) {
    return refused(trigger, e.what());
  } catch (...) {
    return refused(trigger, "applying the config failed");
  }
  for (auto& [part, text] : next.fixed_parts) {
    auto i = running_.fixed_parts.find(part);
    if (i == running_.fixed_parts.end() || i->second != text)
      out.restart_needed.push_back(part);
  }
  for (auto& [part, text] : running_.fixed_parts)
    if (next.fixed_parts.count(part) == 0)
      out.restart_needed.push_back(part);
  for (auto& [owner, listener] : listeners_) {
    try {
      listener(next);
    } catch (const std::exception& e) {
      logger().error("config reload: a listener threw: {}", e.what());
    } catch (...) {
      logger().error("config reload: a listener threw");
    }
  }
  running_ = std::move(next);
  out.ok = true;
  {
    std::lock_guard<std::mutex> guard{status_mx_};
    out.generation = ++status_.generation;
    status_.loaded_unix = unix_now();
  }
  logger().info("config reloaded ({}) from {}: generation {}; sources {}; "
                "routes {}; mcp servers {}",
                trigger, origin, out.generation, summary(out.diff.sources),
                summary(out.diff.routes), summary(out.mcp));
  if (!out.restart_needed.empty())
    logger().warn("config reload: [{}] changed in {} but takes effect only "
                  "after a restart; the node keeps the running values",
                  fmt::join(out.restart_needed, "], ["), origin);
  auto draining = rt_.draining_sources();
  if (!draining.empty())
    logger().info("config reload: source(s) {} drain: they serve the calls "
                  "that started before and stop after the last",
                  fmt::join(draining, ", "));
  return out;
}

} // namespace sluice
