#pragma once

// Where an HTTP client reads the time and sets its timers. In production
// that is the steady clock and Asio timers on the client's loop
// (`real_io_time`); a test hands the client a simulated time instead and
// moves it by hand, so every timeout of an exchange is tested at its exact
// instant with no sleeping (Envoy's `TimeSource` and `SimulatedTimeSystem`,
// for Asio). Actors do not need this: their clock is the actor system's,
// which CAF's testing scheduler simulates.

#include <functional>
#include <memory>

#include "sluice/runtime/policy/time.hpp"

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace sluice::upstream {

/// One timer on an I/O loop. Not thread-safe: used on its loop's thread.
class io_alarm {
public:
  virtual ~io_alarm();

  /// Calls `fire` on the loop, as a handler, once `at` has come -- unless
  /// the alarm is set again, cancelled or destroyed first: then never.
  virtual void set(time_point at, std::function<void()> fire) = 0;

  /// As `set(at, ...)` with the handler of the last `set`, if the alarm
  /// still has it (neither fired nor cancelled since): returns false, and
  /// does nothing, otherwise. For a deadline that moves often (a stream's
  /// idle deadline moves at each read): no new handler is made, and an
  /// alarm moved later is not re-armed (its timer fires at the earlier
  /// instant and waits again for the rest).
  virtual bool move_to(time_point at) = 0;

  virtual void cancel() noexcept = 0;
};

class io_time {
public:
  virtual ~io_time();

  virtual time_point now() const noexcept = 0;

  /// A new alarm whose handlers run on `loop`.
  virtual std::unique_ptr<io_alarm> make_alarm(boost::asio::io_context& loop)
      = 0;
};

/// The steady clock and Asio's steady timers. Shared by every client.
io_time& real_io_time() noexcept;

} // namespace sluice::upstream
