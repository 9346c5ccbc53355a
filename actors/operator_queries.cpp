#include "sluice/actors/operator_queries.hpp"

#include <memory>
#include <set>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include "sluice/messages/atoms.hpp"

namespace sluice {

void ask_progress_ages(caf::actor_system& sys, caf::actor backend,
                       std::vector<std::string> scopes, duration timeout,
                       std::function<void(progress_ages)> answer) {
  sys.spawn([backend = std::move(backend), scopes = std::move(scopes),
             timeout, answer = std::move(answer)](
                caf::event_based_actor* self) -> caf::behavior {
    auto ages = std::make_shared<progress_ages>();
    auto left = std::make_shared<size_t>(scopes.size());
    if (scopes.empty()) {
      answer(*ages);
      return {};
    }
    // Nothing else references this actor; it must live to see the replies.
    auto keep = std::make_shared<caf::actor>(caf::actor_cast<caf::actor>(self));
    for (auto& scope : scopes) {
      auto done = [self, ages, left, answer, scope,
                   keep](std::optional<progress_age> age) {
        (*ages)[scope] = age;
        if (--*left > 0)
          return;
        answer(std::move(*ages));
        *keep = nullptr;
        self->quit();
      };
      self->request(backend, timeout, progress_age_atom_v, scope)
          .then([done](const progress_age& a) { done(a); },
                [done](caf::error&) { done(std::nullopt); });
    }
    return {[](caf::unit_t) {}};
  });
}

void ask_breaker(caf::actor_system& sys, caf::actor breaker,
                 breaker_action action, duration timeout,
                 std::function<void(std::optional<breaker_status>)> answer) {
  sys.spawn([breaker = std::move(breaker), action, timeout,
             answer = std::move(answer)](caf::event_based_actor* self) {
    auto ok = [answer](const breaker_status& st) { answer(st); };
    auto failed = [answer](caf::error&) { answer(std::nullopt); };
    if (action == breaker_action::reset)
      self->request(breaker, timeout, reset_atom_v).then(ok, failed);
    else
      self->request(breaker, timeout, isolate_atom_v).then(ok, failed);
  });
}

caf::actor
spawn_breaker_listener(caf::actor_system& sys, std::vector<caf::actor> breakers,
                       std::function<void(const breaker_event&)> on_event) {
  return sys.spawn([breakers = std::move(breakers),
                    on_event = std::move(on_event)](
                       caf::event_based_actor* self) -> caf::behavior {
    // Each breaker once (weak: a retired one may go).
    auto subscribed = std::make_shared<std::set<caf::actor_addr>>();
    auto subscribe = [self, subscribed](const caf::actor& b) {
      if (!b || !subscribed->insert(b.address()).second)
        return;
      self->request(b, caf::infinite, subscribe_atom_v)
          .then([](const breaker_status&) {}, [](caf::error&) {});
    };
    for (auto& b : breakers)
      subscribe(b);
    return {
        // A breaker added since (a config reload).
        [subscribe](subscribe_atom, const caf::actor& b) { subscribe(b); },
        [on_event](const breaker_event& ev) {
          try {
            on_event(ev);
          } catch (...) {
            // Dropped: one lost notice, never a dead listener.
          }
        },
    };
  });
}

} // namespace sluice
