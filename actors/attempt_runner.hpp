#pragma once

#include <caf/behavior.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/call.hpp"
#include "sluice/messages/source.hpp"

namespace sluice {

/// Makes one attempt on behalf of a governor, at a source that does not
/// time itself (a service's own source). Send it `run_atom`: it asks the
/// source once, replies with the `source_reply` (a failed or vanished source
/// answers `transient`) and quits.
///
/// It is the requester the source sees, and the governor spawns it linked:
/// when the governor dies, or kills it because the attempt timed out, the
/// source sees its requester terminate and abandons the attempt.
caf::behavior attempt_runner(caf::event_based_actor* self, source_actor source,
                             call_request request);

} // namespace sluice
