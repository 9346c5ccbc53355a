// The real alarm (`real_io_time`) on an Asio loop: `move_to` keeps the
// handler, fires it at the instant last given (never earlier, also when
// moved later after the timer was armed), and does nothing for an alarm
// that fired or was cancelled. Real time, bounded; only lower bounds and
// orders are checked, never a duration's upper bound.

#include <chrono>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/loops/io_time.hpp"

using namespace sluice;
using namespace std::chrono_literals;

namespace {

struct alarm_fixture {
  boost::asio::io_context loop;
  upstream::io_time& time = upstream::real_io_time();
  std::unique_ptr<upstream::io_alarm> alarm = time.make_alarm(loop);
  int fired = 0;
  time_point fired_at{};

  void set(time_point at) {
    alarm->set(at, [this] {
      ++fired;
      fired_at = time.now();
    });
  }
};

} // namespace

TEST_CASE_METHOD(alarm_fixture,
                 "io_time: an alarm moved later fires at the later instant",
                 "[io_time]") {
  auto start = time.now();
  set(start + 20ms);
  REQUIRE(alarm->move_to(start + 120ms));
  loop.run_for(3s);
  CHECK(fired == 1);
  CHECK(fired_at >= start + 120ms);
}

TEST_CASE_METHOD(alarm_fixture,
                 "io_time: an alarm moved earlier fires at the earlier instant",
                 "[io_time]") {
  auto start = time.now();
  set(start + 60s);
  REQUIRE(alarm->move_to(start + 20ms));
  loop.run_for(3s); // returns once nothing is pending
  CHECK(fired == 1);
  CHECK(fired_at >= start + 20ms);
}

TEST_CASE_METHOD(alarm_fixture,
                 "io_time: an alarm moved many times fires once",
                 "[io_time]") {
  auto start = time.now();
  set(start + 10ms);
  for (int i = 1; i <= 50; ++i)
    REQUIRE(alarm->move_to(start + 10ms + i * 1ms));
  loop.run_for(3s);
  CHECK(fired == 1);
  CHECK(fired_at >= start + 60ms);
}

TEST_CASE_METHOD(alarm_fixture,
                 "io_time: a fired or cancelled alarm cannot be moved",
                 "[io_time]") {
  auto start = time.now();
  set(start + 1ms);
  loop.run_for(3s);
  REQUIRE(fired == 1);
  CHECK_FALSE(alarm->move_to(start + 10ms));
  set(start + 60s);
  alarm->cancel();
  CHECK_FALSE(alarm->move_to(start + 10ms));
  loop.restart();
  loop.run_for(200ms);
  CHECK(fired == 1);
}
