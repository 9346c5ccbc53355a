#include "sluice/actors/attempt_runner.hpp"

#include <optional>
#include <utility>

#include <caf/event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "sluice/messages/atoms.hpp"

namespace sluice {

caf::behavior attempt_runner(caf::event_based_actor* self, source_actor source,
                             call_request request) {
  return {
      [=](run_atom) -> caf::result<source_reply> {
        auto promise = self->make_response_promise<source_reply>();
        self->request(source, caf::infinite, attempt_atom_v, request)
            .then(
                [=](source_reply& reply) mutable {
                  promise.deliver(std::move(reply));
                  self->quit();
                },
                [=](caf::error&) mutable {
                  // The source failed or is gone: a transient failure.
                  promise.deliver(source_reply{
                      policy::outcome_kind::transient, 0,
                      R"({"error":"source unavailable"})", std::nullopt});
                  self->quit();
                });
        return promise;
      },
  };
}

} // namespace sluice
