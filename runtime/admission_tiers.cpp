#include "sluice/runtime/admission_tiers.hpp"

namespace sluice {

admission_tiers::admission_tiers(caf::actor_system& sys, admission_config cfg)
    : sys_(sys)
    , cfg_(cfg) {
  validate(cfg_);
  global_ = spawn_global_tier(sys_, static_cast<uint32_t>(cfg_.global_cap));
}

tier_handle admission_tiers::new_session() const {
  return spawn_session_tier(sys_, static_cast<uint32_t>(cfg_.session_cap));
}

tier_handle admission_tiers::new_tier(uint32_t cap) const {
  return spawn_session_tier(sys_, cap);
}

tier_handle admission_tiers::new_connection() const {
  return spawn_connection_tier(sys_,
                               static_cast<uint32_t>(cfg_.connection_cap));
}

} // namespace sluice
