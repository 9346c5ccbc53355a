#include "sluice/runtime/policy/breaker/outcome_window.hpp"

#include <chrono>
#include <stdexcept>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::time_point;

namespace {

constexpr window_sample ok{false, false};
constexpr window_sample failed{true, false};
constexpr window_sample slow_ok{false, true};

// A time well away from the clock's epoch, like the actor tests use.
time_point at(std::chrono::milliseconds ms) {
  return time_point{} + 1h + ms;
}

} // namespace

TEST_CASE("count_window holds the last N outcomes") {
  count_window w{4};
  w.record(failed);
  w.record(failed);
  w.record(ok);
  CHECK(w.totals().calls == 3);
  CHECK(w.totals().failures == 2);
  w.record(ok);
  w.record(ok); // pushes out the first failure
  CHECK(w.totals().calls == 4);
  CHECK(w.totals().failures == 1);
  CHECK(w.totals().failure_rate() == Approx(0.25));
  w.record(ok); // pushes out the second failure
  CHECK(w.totals().failures == 0);
}

TEST_CASE("count_window counts slow successes separately") {
  count_window w{3};
  w.record(slow_ok);
  w.record(ok);
  w.record(failed);
  CHECK(w.totals().slow == 1);
  CHECK(w.totals().slow_rate() == Approx(1.0 / 3));
  w.record(ok); // the slow call ages out
  CHECK(w.totals().slow == 0);
}

TEST_CASE("count_window clears") {
  count_window w{2};
  w.record(failed);
  w.clear();
  CHECK(w.totals().calls == 0);
  CHECK(w.totals().failure_rate() == 0.0);
  w.record(ok);
  w.record(failed);
  w.record(failed);
  CHECK(w.totals().failures == 2);
  CHECK(w.totals().calls == 2);
}

TEST_CASE("time_window keeps outcomes of the last span, bucket by bucket") {
  time_window w{10s, 10}; // ten buckets of one second
  w.record(at(0ms), failed);
  w.record(at(500ms), failed);
  w.record(at(4000ms), ok);
  CHECK(w.totals(at(4000ms)).calls == 3);
  CHECK(w.totals(at(9999ms)).failures == 2);
  // At 10 s the first bucket [0 s, 1 s) ages out with both failures.
  CHECK(w.totals(at(10000ms)).failures == 0);
  CHECK(w.totals(at(10000ms)).calls == 1);
  // At 14 s the bucket [4 s, 5 s) ages out too.
  CHECK(w.totals(at(13999ms)).calls == 1);
  CHECK(w.totals(at(14000ms)).calls == 0);
}

TEST_CASE("time_window reuses an aged-out bucket for new outcomes") {
  time_window w{4s, 4};
  w.record(at(0ms), failed);
  w.record(at(4100ms), ok); // same slot as the failure, four seconds later
  auto t = w.totals(at(4100ms));
  CHECK(t.calls == 1);
  CHECK(t.failures == 0);
}

TEST_CASE("time_window after a long silence is empty") {
  time_window w{5s, 5};
  for (int i = 0; i < 50; ++i)
    w.record(at(std::chrono::milliseconds(i * 100)), failed);
  CHECK(w.totals(at(4900ms)).failures == 50);
  CHECK(w.totals(at(1h)).calls == 0);
  w.clear();
  CHECK(w.totals(at(4900ms)).calls == 0);
}

TEST_CASE("windows refuse nonsense sizes") {
  CHECK_THROWS_AS(count_window{0}, std::invalid_argument);
  CHECK_THROWS_AS(time_window(0s, 10), std::invalid_argument);
  CHECK_THROWS_AS(time_window(-1s, 10), std::invalid_argument);
  CHECK_THROWS_AS(time_window(10s, 0), std::invalid_argument);
}
