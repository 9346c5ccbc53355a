#include "sluice/actors/source_gate.hpp"

#include <algorithm>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/loops/back_to_actor.hpp"
#include "sluice/messages/atoms.hpp"

namespace sluice {

namespace {

struct gate_state {
  std::string source;
  std::shared_ptr<policy::tier_counter> tier;
  std::optional<policy::aimd_limit> limit;
  /// Governors waiting for a permit, in order of arrival (one-shot).
  std::vector<caf::actor> watchers;

  static inline const char* name = "sluice.source_gate";
};

using gate_actor = caf::stateful_actor<gate_state>;

// Permits came back: wake as many watchers as there are free permits,
// longest-waiting first. Waking all of them would make every waiting
// governor race for one permit (a thundering herd: O(waiters) messages per
// release).
void wake_watchers(gate_actor* self) {
  auto& st = self->state;
  if (st.watchers.empty())
    return;
  auto s = st.tier->load();
  auto cap = st.tier->cap();
  size_t free = s.in_use < cap ? cap - s.in_use : 0;
  auto n = std::min(free, st.watchers.size());
  for (size_t i = 0; i < n; ++i) {
    self->demonitor(st.watchers[i]);
    self->send(st.watchers[i], freed_atom_v, st.source);
  }
  st.watchers.erase(st.watchers.begin(), st.watchers.begin() + n);
}

caf::behavior gate(gate_actor* self, std::string name,
                   std::shared_ptr<policy::tier_counter> tier,
                   policy::aimd_config aimd) {
  auto& st = self->state;
  st.source = std::move(name);
  st.tier = std::move(tier);
  st.limit.emplace(aimd);
  st.tier->set_cap(st.limit->limit());
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& ws = self->state.watchers;
    ws.erase(std::remove_if(
                 ws.begin(), ws.end(),
                 [&](const caf::actor& w) { return w.address() == dm.source; }),
             ws.end());
  });
  return {
      // An attempt ended (its permit is back): adjust the limit, then wake
      // watchers for what is free under it.
      [self](aimd_atom, policy::outcome_kind kind, uint32_t in_flight) {
        auto& st = self->state;
        st.limit->on_outcome(kind, in_flight);
        st.tier->set_cap(st.limit->limit());
        wake_watchers(self);
      },
      // One-shot: the sender is told about the next freed permit, once.
      [self](watch_atom) {
        auto w = caf::actor_cast<caf::actor>(self->current_sender());
        auto& ws = self->state.watchers;
        if (w && std::find(ws.begin(), ws.end(), w) == ws.end()) {
          self->monitor(w);
          ws.push_back(std::move(w));
        }
      },
      // A permit came back outside an attempt's outcome (its holder died).
      [self](wake_atom) { wake_watchers(self); },
      // Work from `reconfigure_gate` (only that sends a gate a thunk).
      [self](actor_thunk& t) { t.run(self); },
      [self](status_atom) {
        auto s = self->state.tier->load();
        return gate_status{self->state.tier->cap(), s.in_use, s.waiting};
      },
  };
}

} // namespace

void reconfigure_gate(const caf::actor& gate,
                      const policy::aimd_config& aimd) {
  policy::validate(aimd);
  caf::anon_send(gate, actor_thunk{[aimd](caf::local_actor* p) {
                   auto self = static_cast<gate_actor*>(p);
                   auto& st = self->state;
                   st.limit->reconfigure(aimd);
                   st.tier->set_cap(st.limit->limit());
                   wake_watchers(self); // a higher cap frees permits
                 }});
}

caf::actor spawn_source_gate(caf::actor_system& sys, std::string name,
                             std::shared_ptr<policy::tier_counter> tier,
                             const policy::aimd_config& aimd) {
  policy::validate(aimd);
  return sys.spawn(gate, std::move(name), std::move(tier), aimd);
}

} // namespace sluice
