#include "admission_holder.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

namespace sluice::testing {

namespace {

struct holder_state {
  admission_ticket ticket;
};

void refresh(holder_report& r, const admission_ticket& t) {
  for (auto k : {tier_kind::session, tier_kind::connection, tier_kind::global})
    r.holds[static_cast<size_t>(k)] = t.holds(k);
}

caf::behavior holder_actor(caf::stateful_actor<holder_state>* self,
                           admission_path path, duration wait_timeout,
                           std::shared_ptr<holder_report> report) {
  return {
      [=](ask_atom) {
        // The report keeps the progress alive, and the progress keeps this
        // callback: capture the report weakly, or a holder killed while waiting
        // would leave a reference cycle behind.
        std::weak_ptr<holder_report> weak = report;
        report->progress = admit(self, path, wait_timeout,
                                 [=](caf::expected<admission_ticket> r) {
                                   auto report = weak.lock();
                                   if (!report)
                                     return;
                                   report->decided = true;
                                   report->decided_at = self->clock().now();
                                   if (r) {
                                     report->admitted = true;
                                     report->deadline = r->deadline();
                                     self->state.ticket = std::move(*r);
                                   } else {
                                     report->error = std::move(r.error());
                                   }
                                   refresh(*report, self->state.ticket);
                                 });
      },
      [=](give_back_atom) {
        self->state.ticket.release(self);
        refresh(*report, self->state.ticket);
      },
      [=](finish_atom) {
        self->state.ticket.release(self);
        refresh(*report, self->state.ticket);
        self->quit();
      },
  };
}

} // namespace

tier_grid tier_grid::spawn(caf::actor_system& sys, size_t n_sessions,
                           uint32_t session_cap, size_t n_connections,
                           uint32_t connection_cap, uint32_t global_cap) {
  tier_grid g;
  for (size_t i = 0; i < n_sessions; ++i)
    g.sessions.push_back(spawn_tier(sys, tier_kind::session, session_cap));
  for (size_t i = 0; i < n_connections; ++i)
    g.connections.push_back(
        spawn_tier(sys, tier_kind::connection, connection_cap));
  g.global = spawn_tier(sys, tier_kind::global, global_cap);
  g.all = g.sessions;
  g.all.insert(g.all.end(), g.connections.begin(), g.connections.end());
  g.all.push_back(g.global);
  return g;
}

holder spawn_holder(caf::actor_system& sys, admission_path path,
                    duration wait_timeout) {
  auto report = std::make_shared<holder_report>();
  auto actor = sys.spawn(holder_actor, std::move(path), wait_timeout, report);
  return {std::move(actor), std::move(report)};
}

} // namespace sluice::testing
