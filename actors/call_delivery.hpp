#pragma once

#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/result.hpp>

#include "sluice/messages/call.hpp"

namespace sluice {

/// Where a governor's result and stream chunks go. Two forms: a response
/// promise to the actor that sent `call_atom` (chunks go to that actor), or
/// the callback form -- `on_done` / `on_chunk`, called on the governor's
/// thread, for callers that are not actors. The governor sees only this
/// interface.
class call_delivery {
public:
  virtual ~call_delivery();

  /// The call starts: `call_atom` from `self->current_sender()`. What the
  /// governor's handler returns.
  virtual caf::result<call_result> open(caf::event_based_actor* self) = 0;

  /// One piece of a streamed answer, before the result: to `on_chunk` if
  /// there is one, else to the caller, if it is an actor.
  void chunk(caf::event_based_actor* self, std::string bytes);

  /// The result. Called at most once, just before the governor quits.
  virtual void close(call_result result) = 0;

protected:
  explicit call_delivery(std::function<void(std::string)> on_chunk);

  std::function<void(std::string)> on_chunk_;
  caf::actor caller_;
};

/// The callback form if `on_done` is set, else the promise form. Call it
/// when `self` starts: the callback form keeps `self` alive until `close`
/// (nothing else need reference a callback-form governor) and reports
/// `call_status::cancelled` to `on_done` if `self` terminates without a
/// result.
std::unique_ptr<call_delivery>
make_call_delivery(caf::event_based_actor* self,
                   std::function<void(call_result)> on_done,
                   std::function<void(std::string)> on_chunk);

} // namespace sluice
