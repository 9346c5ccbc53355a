// The admission invariant on CAF's real, multi-threaded scheduler: many
// callers acquiring, releasing, timing out and being killed concurrently.
// No timing is asserted; the test checks counts only.

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/admission.hpp"
#include "admission_holder.hpp"
#include "sluice/messages/errors.hpp"

using namespace std::chrono_literals;
using namespace sluice;

namespace {

using again_atom = caf::atom_constant<caf::atom("again")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

struct loop_state {
  admission_ticket ticket;
  int rounds_left = 0;
  bool in_admit = false;
};

struct shared_counts {
  std::atomic<int> admitted{0};
  std::atomic<int> busy{0};
  std::atomic<int> queued{0}; // admissions that waited at a tier owner
  std::atomic<int> violations{0};
};

bool over_cap(const tier_handle& t) {
  auto s = t.status();
  return s.in_use > s.cap;
}

// Acquires, checks the caps while holding, releases; `rounds` times.
caf::behavior looping_caller(caf::stateful_actor<loop_state>* self,
                             admission_path path, int rounds,
                             std::shared_ptr<shared_counts> counts) {
  self->state.rounds_left = rounds;
  self->send(self, again_atom::value);
  return {
      [=](again_atom) {
        if (self->state.rounds_left-- == 0) {
          self->quit();
          return;
        }
        self->state.in_admit = true;
        admit(self, path, 20ms, [=](caf::expected<admission_ticket> r) {
          if (!self->state.in_admit)
            ++counts->queued;
          if (r) {
            ++counts->admitted;
            if (over_cap(path.session) || over_cap(path.connection) ||
                over_cap(path.global))
              ++counts->violations;
            self->state.ticket = std::move(*r);
            // Hold for a moment, so that callers overlap and queue.
            self->delayed_send(self, 200us, done_atom::value);
          } else {
            if (is(r.error(), errc::tool_busy))
              ++counts->busy;
            self->send(self, again_atom::value);
          }
        });
        self->state.in_admit = false;
      },
      [=](done_atom) {
        self->state.ticket.release(self);
        self->send(self, again_atom::value);
      },
  };
}

} // namespace

TEST_CASE("admission holds every cap on the real scheduler") {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", size_t{4});
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  auto grid = testing::tier_grid::spawn(sys, 4, 3, 2, 5, 6);
  const auto& sessions = grid.sessions;
  const auto& connections = grid.connections;
  const auto& global = grid.global;
  const auto& tiers = grid.all;

  auto counts = std::make_shared<shared_counts>();
  std::vector<caf::actor> callers;
  for (int i = 0; i < 48; ++i) {
    admission_path p{sessions[i % 4], connections[i % 2], global};
    callers.push_back(sys.spawn(looping_caller, p, 300, counts));
  }
  caf::scoped_actor self{sys};
  for (auto& c : callers)
    self->monitor(c);

  // Kill a third of the callers while they run, and watch the caps from
  // this thread at the same time.
  std::mt19937 rng{7};
  int sampled_violations = 0;
  for (size_t i = 0; i < callers.size(); ++i) {
    for (auto& t : tiers)
      sampled_violations += over_cap(t) ? 1 : 0;
    if (i % 3 == 0)
      caf::anon_send_exit(callers[rng() % callers.size()],
                          caf::exit_reason::kill);
    std::this_thread::yield();
  }
  for (size_t i = 0; i < callers.size(); ++i)
    self->receive([](const caf::down_msg&) {});

  CHECK(counts->violations == 0);
  CHECK(sampled_violations == 0);
  CHECK(counts->admitted > 100);
  INFO("admitted " << counts->admitted << ", queued " << counts->queued
                   << ", busy " << counts->busy);
  CHECK(counts->queued > 0); // the slow path ran too
  // Permits return synchronously when a holder ends; queued waiters of dead
  // holders leave when their tier processes the down message.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  auto settled = [&] {
    for (auto& t : tiers)
      if (t.status().in_use != 0 || t.status().waiting != 0)
        return false;
    return true;
  };
  while (!settled() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  for (auto& t : tiers) {
    INFO(to_string(t.kind) << " tier");
    CHECK(t.status().in_use == 0);
    CHECK(t.status().waiting == 0);
  }
}
