#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "sluice/messages/admission.hpp"

namespace sluice {

namespace policy {
class tier_counter;
} // namespace policy

/// Records that `holder` holds permit `id` of a tier. The tier observes the
/// holder from then on: if the holder terminates for any reason (done,
/// crashed, killed with `exit_reason::kill`) before releasing, the permit
/// comes back at that moment. If `holder` already terminated, the permit comes
/// back at once.
///
/// Implemented as an attachable on the holder, which is what CAF's own
/// monitors are; it returns the permit directly instead of sending a
/// `down_msg` to the owner, so the fast path stays free of messages.
void attach_permit(caf::abstract_actor* holder,
                   std::shared_ptr<policy::tier_counter> counter,
                   caf::actor owner, permit_id id);

/// Returns permit `id` held by `holder` and stops observing the holder.
/// Idempotent: returns `false` (and changes nothing) if the permit was
/// already returned, explicitly or by the holder's termination.
bool release_permit(caf::abstract_actor* holder, policy::tier_counter& counter,
                    const caf::actor& owner, permit_id id);

} // namespace sluice
