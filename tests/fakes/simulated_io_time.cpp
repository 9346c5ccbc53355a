#include "fakes/simulated_io_time.hpp"

#include <functional>
#include <stdexcept>

#include <boost/asio/post.hpp>

namespace sluice::testing {

struct simulated_io_time::slot {
  boost::asio::io_context* loop = nullptr;
  bool armed = false;
  time_point at{};
  uint64_t generation = 0;
  std::function<void()> fire;
};

class simulated_io_time::alarm final : public upstream::io_alarm {
public:
  alarm(simulated_io_time& time, std::shared_ptr<slot> s)
      : time_(time), slot_(std::move(s)) {
    // nop
  }

  ~alarm() override { cancel(); }

  void set(time_point at, std::function<void()> fire) override {
    std::lock_guard<std::mutex> guard{time_.mx_};
    ++slot_->generation;
    slot_->armed = true;
    slot_->at = at;
    slot_->fire = std::move(fire);
  }

  bool move_to(time_point at) override {
    std::lock_guard<std::mutex> guard{time_.mx_};
    if (!slot_->armed || !slot_->fire)
      return false;
    ++slot_->generation;
    slot_->at = at;
    return true;
  }

  void cancel() noexcept override {
    std::lock_guard<std::mutex> guard{time_.mx_};
    ++slot_->generation;
    slot_->armed = false;
    slot_->fire = nullptr;
  }

private:
  simulated_io_time& time_;
  std::shared_ptr<slot> slot_;
};

simulated_io_time::simulated_io_time(time_point start) : now_(start) {
  // nop
}

time_point simulated_io_time::now() const noexcept {
  std::lock_guard<std::mutex> guard{mx_};
  return now_;
}

std::unique_ptr<upstream::io_alarm>
simulated_io_time::make_alarm(boost::asio::io_context& loop) {
  auto s = std::make_shared<slot>();
  s->loop = &loop;
  std::lock_guard<std::mutex> guard{mx_};
  slots_.push_back(s);
  return std::make_unique<alarm>(*this, std::move(s));
}

std::shared_ptr<simulated_io_time::slot>
simulated_io_time::next_due(time_point until) const {
  std::shared_ptr<slot> best;
  for (auto i = slots_.begin(); i != slots_.end();) {
    auto s = i->lock();
    if (!s) {
      i = slots_.erase(i);
      continue;
    }
    if (s->armed && s->at <= until && (!best || s->at < best->at))
      best = s;
    ++i;
  }
  return best;
}

void simulated_io_time::advance(duration d) {
  if (d < duration::zero())
    throw std::invalid_argument("simulated_io_time: time never goes back");
  std::unique_lock<std::mutex> lk{mx_};
  auto until = now_ + d;
  while (auto s = next_due(until)) {
    if (s->at > now_)
      now_ = s->at;
    s->armed = false;
    auto gen = s->generation;
    auto* loop = s->loop;
    // As a timer's handler: on the loop, and only if the alarm was not set
    // again or cancelled in between.
    boost::asio::post(*loop, [this, s, gen] {
      std::function<void()> f;
      {
        std::lock_guard<std::mutex> guard{mx_};
        if (s->generation != gen || !s->fire)
          return;
        f = std::move(s->fire);
        s->fire = nullptr;
      }
      f();
    });
    lk.unlock();
    loop->poll();
    lk.lock();
  }
  now_ = until;
}

size_t simulated_io_time::pending() const {
  std::lock_guard<std::mutex> guard{mx_};
  size_t n = 0;
  for (auto& w : slots_)
    if (auto s = w.lock(); s && s->armed)
      ++n;
  return n;
}

std::optional<time_point> simulated_io_time::next_alarm() const {
  std::lock_guard<std::mutex> guard{mx_};
  if (auto s = next_due(time_point::max()))
    return s->at;
  return std::nullopt;
}

} // namespace sluice::testing
