#include "sluice/actors/scope_backend.hpp"

#include <string>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"

namespace sluice {

namespace {

struct local_backend_state {
  std::unordered_map<std::string, time_point> last_progress;

  static inline const char* name = "sluice.scope_backend.local";
};

caf::behavior local_backend(caf::stateful_actor<local_backend_state>* self) {
  return {
      [self](progress_atom, const std::string& scope) {
        self->state.last_progress[scope] = self->clock().now();
      },
      [self](progress_age_atom, const std::string& scope) {
        auto& m = self->state.last_progress;
        auto i = m.find(scope);
        if (i == m.end())
          return progress_age{};
        return progress_age{self->clock().now() - i->second};
      },
  };
}

} // namespace

caf::actor spawn_local_scope_backend(caf::actor_system& sys) {
  return sys.spawn(local_backend);
}

} // namespace sluice
