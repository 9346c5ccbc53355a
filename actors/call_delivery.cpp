#include "sluice/actors/call_delivery.hpp"

#include <utility>

#include <caf/event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "sluice/messages/atoms.hpp"

namespace sluice {

namespace {

class promise_delivery final : public call_delivery {
public:
  explicit promise_delivery(std::function<void(std::string)> on_chunk)
      : call_delivery(std::move(on_chunk)) {
    // nop
  }

  caf::result<call_result> open(caf::event_based_actor* self) override {
    caller_ = caf::actor_cast<caf::actor>(self->current_sender());
    promise_ = self->make_response_promise<call_result>();
    return promise_;
  }

  void close(call_result result) override {
    promise_.deliver(std::move(result));
  }

private:
  caf::typed_response_promise<call_result> promise_;
};

// Shared with the functor that reports a cancellation: it runs when the
// governor terminates, when its state may be gone.
struct done_callback {
  std::function<void(call_result)> fn;
  bool called = false; // only touched on the governor's thread
};

class callback_delivery final : public call_delivery {
public:
  callback_delivery(caf::event_based_actor* self,
                    std::function<void(call_result)> on_done,
                    std::function<void(std::string)> on_chunk)
      : call_delivery(std::move(on_chunk))
      , done_(std::make_shared<done_callback>())
      , self_ref_(caf::actor_cast<caf::actor>(self)) {
    done_->fn = std::move(on_done);
    // Terminated without a result (killed: the call was cancelled).
    self->attach_functor([done = done_] {
      if (!done->called) {
        done->called = true;
        call_result r;
        r.status = call_status::cancelled;
        done->fn(std::move(r));
      }
    });
  }

  caf::result<call_result> open(caf::event_based_actor* self) override {
    caller_ = caf::actor_cast<caf::actor>(self->current_sender());
    // The result goes to `on_done`; nobody waits for a reply.
    return caf::delegated<call_result>{};
  }

  void close(call_result result) override {
    done_->called = true;
    done_->fn(std::move(result));
    self_ref_ = nullptr;
  }

private:
  std::shared_ptr<done_callback> done_;
  caf::actor self_ref_;
};

} // namespace

call_delivery::call_delivery(std::function<void(std::string)> on_chunk)
    : on_chunk_(std::move(on_chunk)) {
  // nop
}

call_delivery::~call_delivery() = default;

void call_delivery::chunk(caf::event_based_actor* self, std::string bytes) {
  if (on_chunk_)
    on_chunk_(std::move(bytes));
  else if (caller_)
    self->send(caller_, stream_chunk_atom_v, std::move(bytes));
}

std::unique_ptr<call_delivery>
make_call_delivery(caf::event_based_actor* self,
                   std::function<void(call_result)> on_done,
                   std::function<void(std::string)> on_chunk) {
  if (on_done)
    return std::make_unique<callback_delivery>(self, std::move(on_done),
                                               std::move(on_chunk));
  return std::make_unique<promise_delivery>(std::move(on_chunk));
}

} // namespace sluice
