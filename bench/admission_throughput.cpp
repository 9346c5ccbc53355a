// Admission + release through all three tiers on CAF's real scheduler.
//
//   admission_throughput [rounds_per_caller]
//
// For 1, 2 and 64 concurrent callers (each with its own session, four shared
// connections, one global tier with the default caps), every caller runs
// `rounds` calls: admit, hold the permits across one trip through its
// mailbox (as a call holds them while it works), release, and a message to
// itself for the next call. Prints calls per second. Issue 6 moves this to
// Google Benchmark.

#include <chrono>
#include <cstdlib>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/core.h>

#include "sluice/actors/admission.hpp"
#include "sluice/runtime/admission_tiers.hpp"

namespace {

using next_atom = caf::atom_constant<caf::atom("next")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

struct caller_state {
  long left = 0;
  long busy = 0;
  long waited = 0; // admissions that queued at a tier owner (slow path)
  bool in_admit = false;
  sluice::admission_ticket ticket;
};

caf::behavior caller(caf::stateful_actor<caller_state>* self,
                     sluice::admission_path path, sluice::duration timeout,
                     long rounds, caf::actor report_to) {
  self->state.left = rounds;
  self->send(self, next_atom::value);
  return {
      [=](next_atom) {
        if (self->state.left-- == 0) {
          self->send(report_to, done_atom::value, self->state.busy,
                     self->state.waited);
          self->quit();
          return;
        }
        self->state.in_admit = true;
        sluice::admit(self, path, timeout, [=](auto r) {
          if (!self->state.in_admit)
            ++self->state.waited;
          if (r) {
            self->state.ticket = std::move(*r);
            self->send(self, release_atom::value);
          } else {
            ++self->state.busy;
            self->send(self, next_atom::value);
          }
        });
        self->state.in_admit = false;
      },
      [=](release_atom) {
        self->state.ticket.release(self);
        self->send(self, next_atom::value);
      },
  };
}

// `shared_session`: all callers in one session (cap 16), so most of them
// queue at the session tier's owner: the slow path.
void run(caf::actor_system& sys, int callers, long rounds,
         bool shared_session = false) {
  sluice::admission_config cfg; // defaults: 16 / 256 / 1024, 3 s
  sluice::admission_tiers tiers{sys, cfg};
  std::vector<sluice::tier_handle> connections;
  for (int i = 0; i < 4; ++i)
    connections.push_back(tiers.new_connection());
  auto one_session = tiers.new_session();
  caf::scoped_actor self{sys};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < callers; ++i)
    sys.spawn(caller,
              tiers.path(shared_session ? one_session : tiers.new_session(),
                         connections[i % 4]),
              cfg.wait_timeout, rounds, caf::actor{self});
  long busy = 0;
  long waited = 0;
  for (int i = 0; i < callers; ++i)
    self->receive([&](done_atom, long b, long w) {
      busy += b;
      waited += w;
    });
  std::chrono::duration<double> secs = std::chrono::steady_clock::now() - t0;
  auto calls = static_cast<double>(callers) * static_cast<double>(rounds);
  fmt::print("{:>3} callers{}: {:>10.0f} admissions+releases/s  ({} calls "
             "in {:.3f} s, {} queued, {} tool_busy)\n",
             callers, shared_session ? " in one session (cap 16)" : "",
             calls / secs.count(), static_cast<long>(calls), secs.count(),
             waited, busy);
}

} // namespace

int main(int argc, char** argv) {
  long rounds = argc > 1 ? std::atol(argv[1]) : 200000;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  for (int callers : {1, 2, 64})
    run(sys, callers, callers == 64 ? rounds / 16 : rounds);
  // An actor normally handles a batch of messages per turn on a worker, so
  // a caller's admit/hold/release rarely overlaps another's. One message per
  // turn interleaves the 64 callers and makes them queue for the session.
  caf::actor_system_config contended_cfg;
  contended_cfg.set("scheduler.max-throughput", size_t{1});
  caf::actor_system contended{contended_cfg};
  run(contended, 64, rounds / 16, true);
  return 0;
}
