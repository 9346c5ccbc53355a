#pragma once

#include "runtime/policy/time.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace sluice {

/// Where code outside actors reads the time. Actors read
/// `self->clock().now()` instead, which CAF's testing scheduler virtualises;
/// policy classes never read a clock at all (they take `now` as an argument).
class clock {
public:
  virtual ~clock();

  virtual time_point now() const noexcept = 0;
};

/// The real steady clock (production).
class steady_clock final : public clock {
public:
  time_point now() const noexcept override;
};

/// The clock of an actor system: the steady clock under the default
/// scheduler, the virtual clock under CAF's testing scheduler. Lets code
/// outside actors agree with the actors on what time it is.
class actor_system_clock final : public clock {
public:
  explicit actor_system_clock(caf::actor_system& sys)
      : sys_(sys) {
    // nop
  }

  time_point now() const noexcept override;

private:
  caf::actor_system& sys_;
};

} // namespace sluice
