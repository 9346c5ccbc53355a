// A short, real-time run of three-tier admission: calls from four sessions
// over one connection compete for a global cap of 3 under a 500 ms deadline.
// It shows calls admitted at once, a call admitted after waiting for a permit,
// and `tool_busy` (-32016) rejections naming the tier that was full -- then
// checks that every permit came back.

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/core.h>

#include "sluice/actors/admission.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/admission_tiers.hpp"

using namespace std::chrono_literals;

namespace {

using ms = std::chrono::milliseconds;

struct planned_call {
  std::string name;
  std::string session;
  ms start;
  ms hold;
};

using start_atom = caf::atom_constant<caf::atom("start")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;

struct demo_clock {
  sluice::time_point t0 = sluice::steady::now();
  std::mutex mx;

  template <class... Ts>
  void say(const char* format, Ts&&... xs) {
    auto elapsed = std::chrono::duration_cast<ms>(sluice::steady::now() - t0);
    std::lock_guard<std::mutex> guard{mx};
    fmt::print("[{:>5} ms] ", elapsed.count());
    fmt::print(format, std::forward<Ts>(xs)...);
    fmt::print("\n");
    std::fflush(stdout);
  }
};

struct call_state {
  sluice::admission_ticket ticket;
  sluice::time_point asked_at;
};

// One call: waits until its start time, asks for admission, holds its
// permits for a while, releases them and reports to `done`.
caf::behavior demo_call(caf::stateful_actor<call_state>* self,
                        planned_call plan, sluice::admission_path path,
                        sluice::duration wait_timeout, demo_clock* out,
                        caf::actor done) {
  self->delayed_send(self, plan.start, start_atom::value);
  return {
      [=](start_atom) {
        self->state.asked_at = self->clock().now();
        sluice::admit(self, path, wait_timeout, [=](auto result) {
          auto waited = std::chrono::duration_cast<ms>(self->clock().now() -
                                                       self->state.asked_at);
          if (!result) {
            auto tier = sluice::busy_tier(result.error());
            out->say(
                "{:<8} tool_busy ({}): waited {} ms on the {} tier", plan.name,
                sluice::describe(sluice::errc::tool_busy).json_code,
                waited.count(), tier ? sluice::to_string(*tier) : "(unknown)");
            self->send(done, finish_atom::value);
            self->quit();
            return;
          }
          self->state.ticket = std::move(*result);
          if (waited < 5ms)
            out->say("{:<8} admitted at once, works {} ms", plan.name,
                     plan.hold.count());
          else
            out->say("{:<8} admitted after waiting {} ms, works {} ms",
                     plan.name, waited.count(), plan.hold.count());
          self->delayed_send(self, plan.hold, finish_atom::value);
        });
      },
      [=](finish_atom) {
        self->state.ticket.release(self);
        out->say("{:<8} done, permits returned", plan.name);
        self->send(done, finish_atom::value);
        self->quit();
      },
  };
}

// Prints every tier; returns whether all permits are back.
bool print_tiers(
    const std::vector<std::pair<std::string, sluice::tier_handle>>& tiers) {
  bool all_back = true;
  for (auto& [label, t] : tiers) {
    auto s = t.status();
    fmt::print("  {:<18} cap {:>2}  in use {}  waiting {}\n", label, s.cap,
               s.in_use, s.waiting);
    all_back = all_back && s.in_use == 0 && s.waiting == 0;
  }
  return all_back;
}

int run_demo(caf::actor_system& sys) {
  sluice::admission_config cfg;
  cfg.session_cap = 1;
  cfg.connection_cap = 8;
  cfg.global_cap = 3;
  cfg.wait_timeout = 500ms;
  sluice::admission_tiers tiers{sys, cfg};
  fmt::print("Sluice admission demo: session cap {}, connection cap {}, "
             "global cap {}, one {} ms deadline for all three tiers\n\n",
             cfg.session_cap, cfg.connection_cap, cfg.global_cap,
             std::chrono::duration_cast<ms>(cfg.wait_timeout).count());

  std::vector<planned_call> plan{
      {"alice#1", "alice", 0ms, 300ms},
      {"bob#1", "bob", 0ms, 1500ms},
      {"carol#1", "carol", 0ms, 1500ms},
      {"dave#1", "dave", 50ms, 500ms},    // global full: waits for alice#1
      {"alice#2", "alice", 100ms, 200ms}, // waits on session, then global
      {"bob#2", "bob", 150ms, 200ms},     // bob#1 holds bob's session
  };
  std::map<std::string, sluice::tier_handle> sessions;
  for (auto& c : plan)
    if (sessions.count(c.session) == 0)
      sessions.emplace(c.session, tiers.new_session());
  auto connection = tiers.new_connection();

  demo_clock out;
  caf::scoped_actor self{sys};
  for (auto& c : plan)
    sys.spawn(demo_call, c, tiers.path(sessions[c.session], connection),
              cfg.wait_timeout, &out, caf::actor{self});
  for (size_t i = 0; i < plan.size(); ++i)
    self->receive([](finish_atom) {});

  std::vector<std::pair<std::string, sluice::tier_handle>> all{
      {"global", tiers.global()}, {"connection", connection}};
  for (auto& [name, tier] : sessions)
    all.emplace_back("session " + name, tier);
  fmt::print("\nAfter every call ended:\n");
  if (!print_tiers(all)) {
    fmt::print("ERROR: permits missing\n");
    return 1;
  }
  fmt::print("All permits are back.\n");
  return 0;
}

} // namespace

int main() {
  caf::actor_system_config cfg;
  sluice::add_error_category(cfg);
  caf::actor_system sys{cfg};
  return run_demo(sys);
}
