#pragma once

// The virtual-time fixture every actor test uses: an actor system on CAF's
// testing scheduler, driven from Catch2. Nothing runs until the test says so,
// and time moves only when the test advances it, so a 300-second scenario
// runs in milliseconds and the same way every time.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::testing {

struct virtual_time_fixture {
  virtual_time_fixture();
  virtual ~virtual_time_fixture();

  /// The current virtual time (what `self->clock().now()` returns in actors).
  time_point now() const;

  /// Lets every actor process its mailbox until all are empty. Fires no
  /// timers. Returns the number of messages processed.
  size_t run();

  /// Moves virtual time forward by `d`. Every timer due within `d` fires at
  /// its own instant, in order, with mailboxes drained after each, so actions
  /// that a timer triggers see the right time.
  void advance(duration d);

  /// Moves virtual time forward to `t` (as `advance`).
  void advance_to(time_point t);

  /// Messages processed so far, by `run` and `advance` (timer messages
  /// included): what "messages per call" figures are measured with.
  size_t processed = 0;

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;
};

} // namespace sluice::testing
