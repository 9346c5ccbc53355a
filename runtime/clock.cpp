#include "runtime/clock.hpp"

#include <caf/actor_clock.hpp>
#include <caf/actor_system.hpp>

namespace sluice {

static_assert(std::is_same_v<caf::actor_clock::clock_type, steady>,
              "CAF's actor clock must be the steady clock Sluice assumes");

clock::~clock() = default;

time_point steady_clock::now() const noexcept {
  return steady::now();
}

time_point actor_system_clock::now() const noexcept {
  return sys_.clock().now();
}

} // namespace sluice
