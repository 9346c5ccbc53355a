#pragma once

#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/response_promise.hpp>
#include <caf/result.hpp>

#include "sluice/messages/call.hpp"

namespace sluice {

/// Where a governor's result and stream chunks go. Two forms: a response
/// promise to the actor that sent `call_atom` (chunks go to that actor), or
/// the callback form -- `on_done` / `on_chunk`, called on the governor's
/// thread, for callers that are not actors.
///
/// A value in its actor's state, not a heap object of its own: every call
/// has one, and a parked call should carry no more than it needs. The
/// callback form's `on_done` lives in an attachable of the actor (it must
/// still run, with `cancelled`, after the state is gone).
class call_delivery {
public:
  /// The promise form, until `start` says otherwise.
  call_delivery() = default;

  call_delivery(const call_delivery&) = delete;
  call_delivery& operator=(const call_delivery&) = delete;

  /// The callback form if `on_done` is set, else the promise form. Call it
  /// when `self` starts: the callback form keeps `self` alive until `close`
  /// (nothing else need reference a callback-form governor) and reports
  /// `call_status::cancelled` to `on_done` if `self` terminates without a
  /// result.
  void start(caf::event_based_actor* self,
             std::function<void(call_result)> on_done,
             std::function<void(std::string)> on_chunk);

  /// The call starts: `call_atom` from `self->current_sender()`, or no
  /// message at all (a callback-form actor starting its call itself). What
  /// the governor's handler returns.
  caf::result<call_result> open(caf::event_based_actor* self);

  /// One piece of a streamed answer, before the result: to `on_chunk` if
  /// there is one, else to the caller, if it is an actor.
  void chunk(caf::event_based_actor* self, std::string bytes);

  /// The result. Called at most once, just before the governor quits.
  void close(call_result result);

  /// Reports `cancelled` unless the result came (callback form).
  class done_observer;

private:
  /// Callback form: owned by the actor's attachables, which outlive every
  /// handler (null: the promise form).
  done_observer* done_ = nullptr;
  /// Callback form: keeps the actor alive until `close`.
  caf::actor self_ref_;
  /// Promise form.
  caf::response_promise promise_;
  std::function<void(std::string)> on_chunk_;
  caf::actor caller_;
};

} // namespace sluice
