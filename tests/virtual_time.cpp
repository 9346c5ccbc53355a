#include "virtual_time.hpp"

#include <chrono>

#include "sluice/messages/errors.hpp"

namespace sluice::testing {

namespace {

caf::actor_system_config& configure(caf::actor_system_config& cfg) {
  // The atom, not the string "testing": a string silently selects the real
  // scheduler.
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.file-verbosity", caf::atom("quiet"));
  cfg.set("logger.console-verbosity", caf::atom("quiet"));
  add_error_category(cfg);
  return cfg;
}

} // namespace

virtual_time_fixture::virtual_time_fixture()
    : sys(configure(cfg))
    , sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
  // Pending delayed messages keep their receivers alive; do not wait for
  // them when the system shuts down.
  sys.await_actors_before_shutdown(false);
  // Start well away from the clock's epoch, as CAF's own fixture does.
  sched.clock().current_time += std::chrono::hours(1);
}

virtual_time_fixture::~virtual_time_fixture() {
  run();
}

time_point virtual_time_fixture::now() const {
  return sched.clock().current_time;
}

size_t virtual_time_fixture::run() {
  auto n = sched.run();
  processed += n;
  return n;
}

void virtual_time_fixture::advance(duration d) {
  advance_to(now() + d);
}

void virtual_time_fixture::advance_to(time_point t) {
  auto& clk = sched.clock();
  run();
  for (;;) {
    const auto& pending = clk.schedule();
    if (pending.empty() || pending.begin()->first > t)
      break;
    auto due = pending.begin()->first;
    clk.advance_time(due > clk.current_time ? due - clk.current_time
                                            : duration::zero());
    run();
  }
  if (t > clk.current_time)
    clk.advance_time(t - clk.current_time);
  run();
}

} // namespace sluice::testing
