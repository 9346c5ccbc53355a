#pragma once

// A thread of our own (an HTTP source's I/O thread, a Redis worker) that
// touches actors counts as running in their actor system for as long as it
// may touch one.
//
// Why: such a thread sends to an actor through a reference it upgrades from
// a weak one. When that temporary is the actor's last reference, CAF cleans
// the actor up right there, on our thread -- while, unaware of it, the
// actor system's destructor may be freeing the system under that cleanup
// (CI saw it as a SIGSEGV in the next test). The system's destructor waits
// until its running count is zero, so a hold taken before the thread starts
// and released after it is joined (and after every actor reference it kept
// is gone) keeps the system alive for all of it.
//
// NOTE: only an actor system that awaits its actors at shutdown (CAF's
// default) waits for the count; sluice-node turns that off
// (`await_actors_before_shutdown(false)`) and so relies on its order of
// destruction instead: the front, the runtime (whose sources join their
// threads), then the system. A Redis worker that detached itself (destroyed
// on its own thread) may then outlive the system by one command.
//
// Left open: CAF's `dec_running` decrements before it locks the mutex it
// then notifies under; a destructor that checks the count in between frees
// that mutex first. CAF's own detached actors share that window of a few
// instructions.

#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>

namespace sluice {

class system_hold {
public:
  explicit system_hold(caf::actor_system& sys)
      : registry_(&sys.registry()) {
    registry_->inc_running();
  }

  ~system_hold() { registry_->dec_running(); }

  system_hold(const system_hold&) = delete;
  system_hold& operator=(const system_hold&) = delete;

private:
  caf::actor_registry* registry_;
};

} // namespace sluice
