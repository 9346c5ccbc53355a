#include "sluice/runtime/policy/breaker/probe_leases.hpp"

#include <algorithm>

#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

namespace sluice::policy {

probe_grant probe_leases::try_grant(std::optional<uint64_t> holder,
                                    time_point now, uint32_t limit,
                                    duration period, bool shared) {
  // Shared: a probe goes only under this node's cluster probe lease; once
  // it lapsed unused (no call came), it is claimed again first.
  if (shared && holder && leases_.empty() && cluster_lease_lapsed(now))
    return {probe_grant::verdict::claim_first, {}, now + claim_wait};
  if (!holder || leases_.size() >= limit)
    return {probe_grant::verdict::refused, {}, soonest(now + period)};
  probe_lease lease{next_id_++, *holder, now + period};
  leases_.push_back(lease);
  return {probe_grant::verdict::granted, lease, {}};
}

const probe_lease* probe_leases::find(uint64_t id) const noexcept {
  auto i = std::find_if(leases_.begin(), leases_.end(),
                        [id](const probe_lease& l) { return l.id == id; });
  return i == leases_.end() ? nullptr : &*i;
}

std::optional<uint64_t> probe_leases::release(uint64_t id) {
  auto i = std::find_if(leases_.begin(), leases_.end(),
                        [id](const probe_lease& l) { return l.id == id; });
  if (i == leases_.end())
    return std::nullopt;
  auto holder = i->holder;
  leases_.erase(i);
  return holder;
}

void probe_leases::drop_holder(uint64_t holder) {
  leases_.erase(std::remove_if(leases_.begin(), leases_.end(),
                               [holder](const probe_lease& l) {
                                 return l.holder == holder;
                               }),
                leases_.end());
}

std::vector<uint64_t> probe_leases::clear() {
  std::vector<uint64_t> holders;
  for (auto& l : leases_)
    if (std::find(holders.begin(), holders.end(), l.holder) == holders.end())
      holders.push_back(l.holder);
  leases_.clear();
  return holders;
}

bool probe_leases::holds(uint64_t holder) const noexcept {
  return std::any_of(leases_.begin(), leases_.end(),
                     [holder](const probe_lease& l) {
                       return l.holder == holder;
                     });
}

time_point probe_leases::soonest(time_point fallback) const noexcept {
  for (auto& l : leases_)
    fallback = std::min(fallback, l.expires);
  return fallback;
}

bool probe_leases::should_claim(uint64_t generation) {
  if (claim_for_ == generation)
    return false;
  claim_for_ = generation;
  return true;
}

claim_verdict probe_leases::on_claim(uint64_t claimed_for, duration left,
                                     time_point now, const breaker_policy& m) {
  if (claim_for_ == claimed_for)
    claim_for_.reset();
  if (claimed_for != m.generation() || m.state() == breaker_state::closed ||
      m.isolated())
    return {claim_verdict::action::ignore, {}};
  if (left <= duration::zero()) {
    // Ours for one open period -- or Redis did not answer, and this node
    // decides alone for as long.
    cluster_until_ = now + m.config().open_duration;
    return {claim_verdict::action::half_open, {}};
  }
  return {claim_verdict::action::hold_until, now + left};
}

} // namespace sluice::policy
