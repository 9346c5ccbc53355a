#pragma once

// The runtime's hold on its sources' actors, shared by its files
// (runtime.cpp, source_registry.cpp, route_table.cpp): which of them died,
// and what keeps a source that a reload retired alive until its last call.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "sluice/actors/log.hpp"

namespace sluice {

struct remote_link_health;

// -- actor_health -------------------------------------------------------------

struct actor_health {
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
struct source_lifetime {
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

} // namespace sluice
