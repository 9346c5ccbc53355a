#include "sluice/actors/loops/io_time.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice::upstream {

io_alarm::~io_alarm() = default;

io_time::~io_time() = default;

namespace {

namespace net = boost::asio;

// A cancelled steady_timer still calls its handler (with
// `operation_aborted`), and a handler queued before `set` or `cancel` runs
// after it; the generation tells a stale handler from the current one.
// The handler holds the state, not the alarm, so it may run after the
// alarm is gone (it then does nothing).
class steady_alarm final : public io_alarm {
public:
  explicit steady_alarm(net::io_context& loop)
      : state_(std::make_shared<state>(loop)) {
    // nop
  }

  ~steady_alarm() override { cancel(); }

  void set(time_point at, std::function<void()> fire) override {
    state_->fire = std::move(fire);
    schedule(at);
  }

  bool move_to(time_point at) override {
    if (!state_->fire)
      return false;
    schedule(at);
    return true;
  }

  void cancel() noexcept override {
    auto& s = *state_;
    ++s.generation;
    s.fire = nullptr;
    s.waiting = false;
    try {
      s.timer.cancel(); // throws only for a timer that failed to build
    } catch (...) {
      // The handler still finds the generation moved on.
    }
  }

private:
  struct state {
    explicit state(net::io_context& loop) : timer(loop) {
      // nop
    }
    net::steady_timer timer;
    uint64_t generation = 0;
    std::function<void()> fire;
    /// When `fire` is due.
    time_point due{};
    /// A wait is pending on `timer`, for `armed_at` (<= `due`).
    bool waiting = false;
    time_point armed_at{};
  };

  // Due at `at`: a pending wait for an instant not after it stays (it
  // waits again for the rest when it fires); else the timer is set again.
  void schedule(time_point at) {
    auto& s = *state_;
    s.due = at;
    if (s.waiting && s.armed_at <= at)
      return;
    arm(state_, at);
  }

  static void arm(const std::shared_ptr<state>& st, time_point at) {
    auto gen = ++st->generation;
    st->waiting = true;
    st->armed_at = at;
    st->timer.expires_at(at); // a pending wait ends, stale
    st->timer.async_wait([st, gen](const boost::system::error_code&) {
      if (st->generation != gen)
        return; // stale: set again, or cancelled
      st->waiting = false;
      if (!st->fire)
        return;
      if (steady::now() < st->due)
        return arm(st, st->due); // moved later meanwhile
      auto f = std::move(st->fire);
      st->fire = nullptr;
      f();
    });
  }

  std::shared_ptr<state> state_;
};

class steady_io_time final : public io_time {
public:
  time_point now() const noexcept override { return steady::now(); }

  std::unique_ptr<io_alarm> make_alarm(net::io_context& loop) override {
    return std::make_unique<steady_alarm>(loop);
  }
};

} // namespace

io_time& real_io_time() noexcept {
  static steady_io_time instance;
  return instance;
}

} // namespace sluice::upstream
