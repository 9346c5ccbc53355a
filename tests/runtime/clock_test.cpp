#include "runtime/clock.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "virtual_time.hpp"

using namespace std::chrono_literals;

TEST_CASE("actor_system_clock follows virtual time under the test scheduler") {
  sluice::testing::virtual_time_fixture f;
  sluice::actor_system_clock clk{f.sys};
  auto t0 = clk.now();
  CHECK(t0 == f.now());
  f.advance(300s);
  CHECK(clk.now() - t0 == 300s);
}

TEST_CASE("steady_clock never goes backwards") {
  sluice::steady_clock clk;
  auto a = clk.now();
  auto b = clk.now();
  CHECK(b >= a);
}
