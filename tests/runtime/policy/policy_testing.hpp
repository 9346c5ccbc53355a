#pragma once

// What the policy tests share: the instant their time starts at, and how a
// settings check's refusal is read.

#include <chrono>
#include <stdexcept>
#include <string>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::testing {

/// Where the tests' time starts: an hour after the clock's epoch, so that
/// instants before it are valid too.
inline const time_point t0 = time_point{} + std::chrono::hours{1};

/// What `validate(cfg)` refuses `cfg` with ("FIELD: problem"), or "" when
/// it accepts it.
template <class Config>
std::string refusal(const Config& cfg) {
  try {
    validate(cfg);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

} // namespace sluice::testing
