#include "sluice/runtime/sources.hpp"

#include <memory>

#include <caf/actor_system.hpp>

#include "sluice/runtime/config_error.hpp"

namespace sluice {

source_handle make_source(
    caf::actor_system& sys, std::string name, source_actor actor,
    const policy::breaker_config& breaker, const policy::aimd_config& aimd,
    const std::optional<policy::quota_config>& quota, bool self_timed,
    std::shared_ptr<shared_ejections> ejections, bool obey_rate_limit_headers) {
  policy::validate(aimd);
  if (quota)
    policy::validate(*quota);
  auto tier = std::make_shared<policy::tier_counter>(aimd.initial);
  auto b = spawn_breaker(sys, name, breaker, std::move(ejections));
  auto g = spawn_source_gate(sys, name, tier, aimd);
  std::shared_ptr<source_quota> q;
  if (quota)
    q = std::make_shared<source_quota>(*quota, sys.clock().now());
  source_handle h;
  h.name = std::move(name);
  h.actor = std::move(actor);
  h.breaker = std::move(b);
  h.tier = std::move(tier);
  h.gate = std::move(g);
  h.quota = std::move(q);
  if (obey_rate_limit_headers)
    h.headroom = std::make_shared<source_headroom>();
  h.self_timed = self_timed;
  return h;
}

void validate_source_settings(const std::string& key,
                              const source_settings& s) {
  with_key_prefix(key + ".breaker", [&] { validate(s.breaker); });
  with_key_prefix(key + ".aimd", [&] { validate(s.aimd); });
  if (s.quota)
    with_key_prefix(key + ".quota", [&] { validate(*s.quota); });
}

} // namespace sluice
