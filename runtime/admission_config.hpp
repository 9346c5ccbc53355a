#pragma once

#include <chrono>
#include <cstdint>

#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// Settings of three-tier admission (SPEC §1). Defaults are the seed's.
/// Caps are signed so that a negative value from a config file reaches
/// `validate` and is refused by name instead of wrapping around.
struct admission_config {
  /// Calls in flight per session (`admission.session_cap`).
  int64_t session_cap = 16;
  /// Calls in flight per client connection (`admission.connection_cap`).
  int64_t connection_cap = 256;
  /// Calls in flight in the whole process (`admission.global_cap`).
  int64_t global_cap = 1024;
  /// One deadline for all three acquisitions (`admission.wait_timeout`).
  duration wait_timeout = std::chrono::seconds{3};
};

/// Throws `std::invalid_argument("FIELD: problem")` for the first invalid
/// field, as every settings check of the library does (the facade and the
/// config reader name the key, `admission.FIELD`): every cap must be in
/// [1, 2^31 - 1] and `wait_timeout` must be positive.
void validate(const admission_config& cfg);

} // namespace sluice
