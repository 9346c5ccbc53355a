#include "sluice/runtime/policy/admission/waiter_queue.hpp"

#include <chrono>
#include <vector>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using sluice::time_point;
using queue = sluice::policy::waiter_queue<int>;

namespace {

time_point at(std::chrono::milliseconds ms) {
  return time_point{} + ms;
}

std::vector<int> payloads(queue& q) {
  std::vector<int> out;
  q.for_each(
      [&](queue::waiter_id, queue::waiter& w) { out.push_back(w.payload); });
  return out;
}

} // namespace

TEST_CASE("waiter_queue serves waiters in arrival order") {
  queue q;
  auto a = q.push(at(3000ms), 1);
  auto b = q.push(at(1000ms), 2); // an earlier deadline does not jump ahead
  q.push(at(2000ms), 3);
  CHECK(q.front_id() == a);
  CHECK(q.take(q.front_id()).payload == 1);
  CHECK(q.front_id() == b);
  CHECK(payloads(q) == std::vector<int>{2, 3});
}

TEST_CASE("waiter_queue removes from the middle and skips departed waiters") {
  queue q;
  auto a = q.push(at(1s), 1);
  auto b = q.push(at(1s), 2);
  auto c = q.push(at(1s), 3);
  q.take(b);
  CHECK(q.find(b) == nullptr);
  CHECK(q.size() == 2);
  q.take(a);
  CHECK(q.front_id() == c);
  CHECK(q.find(c)->deadline == at(1s));
}

TEST_CASE("waiter_queue ids are never reused, so stale timers match nothing") {
  queue q;
  auto a = q.push(at(1s), 1);
  q.take(a);
  auto b = q.push(at(1s), 2);
  CHECK(a != b);
  CHECK(q.find(a) == nullptr);
}

TEST_CASE("waiter_queue stays small when waiters leave from the middle") {
  queue q;
  q.push(at(1s), 0); // an old waiter stays at the front throughout
  for (int i = 1; i <= 10000; ++i)
    q.take(q.push(at(1s), i));
  CHECK(q.size() == 1);
  CHECK(payloads(q) == std::vector<int>{0});
}

TEST_CASE("deadline_passed is inclusive") {
  CHECK(sluice::deadline_passed(at(3000ms), at(3000ms)));
  CHECK_FALSE(sluice::deadline_passed(at(3000ms), at(2999ms)));
}

TEST_CASE("waiter_queue knows its earliest deadline, whatever the order") {
  queue q;
  CHECK_FALSE(q.earliest_deadline().has_value());
  auto a = q.push(at(3000ms), 1);
  CHECK(q.earliest_deadline() == at(3000ms));
  auto b = q.push(at(1000ms), 2);
  q.push(at(2000ms), 3);
  CHECK(q.earliest_deadline() == at(1000ms));
  q.take(b); // leaving from the middle moves the earliest on
  CHECK(q.earliest_deadline() == at(2000ms));
  q.take(a);
  CHECK(q.earliest_deadline() == at(2000ms));
}

TEST_CASE("waiter_queue hands over exactly the waiters whose deadline passed") {
  queue q;
  q.push(at(3000ms), 1);
  q.push(at(1000ms), 2);
  q.push(at(2000ms), 3);
  q.push(at(2000ms), 4); // two waiters may share a deadline
  CHECK(q.take_expired(at(999ms)).empty());
  // Inclusive, as `deadline_passed`: a deadline of exactly now has passed.
  auto gone = q.take_expired(at(2000ms));
  std::vector<int> out;
  for (auto& [id, w] : gone)
    out.push_back(w.payload);
  CHECK(out == std::vector<int>{2, 3, 4});
  CHECK(q.size() == 1);
  CHECK(payloads(q) == std::vector<int>{1});
  CHECK(q.earliest_deadline() == at(3000ms));
  CHECK(q.take_expired(at(5000ms)).size() == 1);
  CHECK(q.empty());
  CHECK_FALSE(q.earliest_deadline().has_value());
}
