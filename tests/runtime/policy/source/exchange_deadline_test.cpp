// The deadlines of one HTTP exchange's steps, with plain numbers: the one
// place that decides when an upstream has been silent too long.

#include "sluice/runtime/policy/source/exchange_deadline.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::policy;

namespace {

const time_point t0{std::chrono::hours{1}};

exchange_timeouts timeouts() {
  exchange_timeouts t;
  t.connect = 5s;
  t.first_byte = 120s;
  t.idle = 60s;
  t.response = 300s;
  return t;
}

} // namespace

TEST_CASE("a setup step has one connect timeout - or less by the attempt's "
          "deadline") {
  auto t = timeouts();
  CHECK(setup_deadline(t, t0, std::nullopt) == t0 + 5s);
  CHECK(setup_deadline(t, t0 + 2s, std::nullopt) == t0 + 7s);
  CHECK(setup_deadline(t, t0, t0 + 3s) == t0 + 3s);
  CHECK(setup_deadline(t, t0, t0 + 9s) == t0 + 5s);
}

TEST_CASE("before the body's first byte the clock runs from sending") {
  auto t = timeouts();
  // Headers may arrive at any time: the first body byte is due 120 s after
  // sending, however late `now` is.
  CHECK(read_deadline(t, t0, false, t0, std::nullopt) == t0 + 120s);
  CHECK(read_deadline(t, t0, false, t0 + 100s, std::nullopt) == t0 + 120s);
}

TEST_CASE("after the first body byte each read has one idle timeout") {
  auto t = timeouts();
  CHECK(read_deadline(t, t0, true, t0 + 10s, std::nullopt) == t0 + 70s);
  CHECK(read_deadline(t, t0, true, t0 + 200s, std::nullopt) == t0 + 260s);
}

TEST_CASE("the response timeout bounds every read however busy the body") {
  auto t = timeouts();
  CHECK(read_deadline(t, t0, true, t0 + 250s, std::nullopt) == t0 + 300s);
  t.response = 100s; // shorter than the first-byte timeout
  CHECK(read_deadline(t, t0, false, t0, std::nullopt) == t0 + 100s);
}

TEST_CASE("the attempt's own deadline is the outer bound of every read") {
  auto t = timeouts();
  CHECK(read_deadline(t, t0, false, t0, t0 + 300ms) == t0 + 300ms);
  CHECK(read_deadline(t, t0, true, t0 + 1s, t0 + 30s) == t0 + 30s);
  CHECK(read_deadline(t, t0, true, t0 + 1s, t0 + 90s) == t0 + 61s);
}
