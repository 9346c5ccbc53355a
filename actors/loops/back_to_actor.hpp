#pragma once

// Handing work back to an actor from a thread of our own (a Redis worker,
// an HTTP client's I/O thread): the closure is sent as a message and runs
// in the actor's context, where its state may be touched.
//
// The thread holds the actor weakly, so it never keeps it alive; the
// reference upgraded for the send may still be the last one, and CAF then
// cleans the actor up on that thread -- the thread must hold the actor
// system (`system_hold`) and survive its owner's destruction.

#include <functional>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/local_actor.hpp>
#include <caf/send.hpp>
#include <caf/weak_intrusive_ptr.hpp>

namespace sluice {

/// A closure to run in the receiving actor's context. Every actor that is
/// handed work this way has the handler `[self](actor_thunk& t) {
/// t.run(self); }`.
struct actor_thunk {
  std::function<void(caf::local_actor*)> run;
};

} // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::actor_thunk)

namespace sluice {

/// An actor's weak reference to itself, typed: work handed back through it
/// runs only in an actor of type `Actor` (every such actor handles the same
/// `actor_thunk`, so an untyped reference could send one to another kind).
template <class Actor>
class weak_self {
public:
  explicit weak_self(Actor* self)
      : ptr_(caf::actor_cast<caf::weak_actor_ptr>(self)) {
    // nop
  }

  const caf::weak_actor_ptr& ptr() const noexcept { return ptr_; }

private:
  caf::weak_actor_ptr ptr_;
};

/// Sends `f` (called with the actor as an `Actor*`) to the actor `me`
/// names, if it still lives; drops it otherwise.
template <class Actor, class F>
void back_to(const weak_self<Actor>& me, F f) {
  if (auto strong = caf::actor_cast<caf::actor>(me.ptr().lock()))
    caf::anon_send(
        strong, actor_thunk{[f = std::move(f)](caf::local_actor* self) mutable {
          f(static_cast<Actor*>(self));
        }});
}

} // namespace sluice
