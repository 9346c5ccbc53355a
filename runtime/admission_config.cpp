#include "sluice/runtime/admission_config.hpp"

#include <stdexcept>
#include <string>

#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"

namespace sluice {

namespace {

void check_cap(const char* field, int64_t value) {
  constexpr auto max = static_cast<int64_t>(policy::tier_counter::max_cap);
  if (value < 1 || value > max)
    throw field_error(field, "must be an integer in [1, " +
                                 std::to_string(max) + "], got " +
                                 std::to_string(value));
}

} // namespace

void validate(const admission_config& cfg) {
  check_cap("session_cap", cfg.session_cap);
  check_cap("connection_cap", cfg.connection_cap);
  check_cap("global_cap", cfg.global_cap);
  if (cfg.wait_timeout <= duration::zero()) {
    auto ms = std::chrono::duration<double, std::milli>(cfg.wait_timeout);
    throw field_error("wait_timeout", "must be positive, got " +
                                          std::to_string(ms.count()) + " ms");
  }
}

} // namespace sluice
