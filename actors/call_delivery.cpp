#include "sluice/actors/call_delivery.hpp"

#include <utility>

#include <caf/attachable.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/mailbox_element.hpp>

#include "sluice/messages/atoms.hpp"

namespace sluice {

// Attached to a callback-form actor: if it terminates without a result
// (killed: the call was cancelled), `on_done` hears `cancelled`. It runs
// with the actor's other attachables, after its state is gone and after the
// permits observed by later attachables came back.
class call_delivery::done_observer final : public caf::attachable {
public:
  explicit done_observer(std::function<void(call_result)> fn)
      : fn_(std::move(fn)) {
    // nop
  }

  void actor_exited(const caf::error&, caf::execution_unit*) override {
    if (!called_) {
      called_ = true;
      call_result r;
      r.status = call_status::cancelled;
      fn_(std::move(r));
    }
  }

  // Only called on the actor's thread, while it runs (so before
  // `actor_exited`).
  void deliver(call_result result) {
    called_ = true;
    fn_(std::move(result));
  }

private:
  std::function<void(call_result)> fn_;
  bool called_ = false;
};

void call_delivery::start(caf::event_based_actor* self,
                          std::function<void(call_result)> on_done,
                          std::function<void(std::string)> on_chunk) {
  on_chunk_ = std::move(on_chunk);
  if (!on_done)
    return;
  auto observer = new done_observer(std::move(on_done));
  done_ = observer;
  self_ref_ = caf::actor_cast<caf::actor>(self);
  self->attach(caf::attachable_ptr{observer});
}

caf::result<call_result>
call_delivery::open(caf::event_based_actor* self) {
  // No message when the actor starts the call itself (callback form,
  // `governor_config::start_at_once`): no caller.
  if (auto msg = self->current_mailbox_element())
    caller_ = caf::actor_cast<caf::actor>(msg->sender);
  if (done_ != nullptr) // the result goes to `on_done`; nobody waits
    return caf::delegated<call_result>{};
  promise_ = self->make_response_promise();
  return caf::delegated<call_result>{};
}

void call_delivery::chunk(caf::event_based_actor* self, std::string bytes) {
  if (on_chunk_)
    on_chunk_(std::move(bytes));
  else if (caller_)
    self->send(caller_, stream_chunk_atom_v, std::move(bytes));
}

void call_delivery::close(call_result result) {
  if (done_ != nullptr) {
    done_->deliver(std::move(result));
    self_ref_ = nullptr;
    return;
  }
  promise_.deliver(std::move(result));
}

} // namespace sluice
