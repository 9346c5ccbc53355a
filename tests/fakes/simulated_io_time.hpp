#pragma once

// A simulated time for HTTP clients under test (`upstream::io_time`): it
// stands still until the test moves it, and then fires every alarm due, in
// order, each at its own instant. The test runs the client's loop on its
// own thread, so a timeout is seen at exactly its instant and a scenario of
// minutes takes no time.

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "sluice/actors/loops/io_time.hpp"

namespace sluice::testing {

class simulated_io_time final : public upstream::io_time {
public:
  /// Starts at `start`; alarms post their handlers to the loop they were
  /// made for, and `advance` runs those loops' ready handlers itself.
  explicit simulated_io_time(time_point start = time_point{
                                 std::chrono::hours{1}});

  time_point now() const noexcept override;

  std::unique_ptr<upstream::io_alarm>
  make_alarm(boost::asio::io_context& loop) override;

  /// Moves time forward by `d`: for each alarm due by then, earliest first,
  /// time moves to its instant, its handler runs (on its loop, run here by
  /// `poll`), and so do the handlers that one made ready; an alarm set by
  /// them that is due within `d` fires in turn. Ends at now + `d`.
  void advance(duration d);

  /// Alarms set and not yet fired or cancelled.
  size_t pending() const;

  /// When the earliest of them is due (nothing: none is set).
  std::optional<time_point> next_alarm() const;

private:
  struct slot;
  class alarm;

  std::shared_ptr<slot> next_due(time_point until) const;

  mutable std::mutex mx_;
  time_point now_;
  mutable std::vector<std::weak_ptr<slot>> slots_;
};

} // namespace sluice::testing
