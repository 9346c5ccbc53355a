#pragma once

#include <map>
#include <optional>
#include <string>

#include "sluice/runtime/policy/breaker/breaker_policy.hpp"
#include "sluice/runtime/policy/source/aimd.hpp"
#include "sluice/runtime/policy/source/token_bucket.hpp"

namespace sluice {

/// Settings of one source's breaker and source tier.
struct source_settings {
  policy::breaker_config breaker;
  policy::aimd_config aimd;
  /// Optional rate quota.
  std::optional<policy::quota_config> quota;
  /// The upstream's own name for models the clients name: a call for key
  /// "gpt-4o" reaches this source with the value in its body's `model`.
  std::map<std::string, std::string> model_names{};
  /// Read the upstream's own rate-limit headers (OpenAI's and Anthropic's)
  /// and hold back a call they say it cannot take now (SPEC §12): it
  /// waits for their reset (stall time) or goes to another source.
  bool obey_rate_limit_headers = true;
};

} // namespace sluice
