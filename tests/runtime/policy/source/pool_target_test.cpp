// How many connections an upstream pool keeps: the recent peak of calls in
// flight, capped by max_idle_connections.

#include "sluice/runtime/policy/source/pool_target.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::policy;

TEST_CASE("a pool keeps as many connections as calls ran at once recently") {
  time_point t0{};
  pool_target p{256, 60s};
  for (size_t n = 1; n <= 64; ++n)
    p.record(n, t0);
  CHECK(p.keep(t0) == 64);
  // The calls finish one by one: each connection goes back while those
  // still in use plus the pooled ones are under 64.
  for (size_t idle = 0; idle < 64; ++idle)
    CHECK(p.keeps_another(63 - idle, idle, t0 + 1s));
  CHECK_FALSE(p.keeps_another(0, 64, t0 + 1s));
}

TEST_CASE("max_idle caps what a pool keeps") {
  time_point t0{};
  pool_target p{16, 60s};
  p.record(64, t0);
  CHECK(p.keep(t0) == 16);
  CHECK(p.keeps_another(10, 5, t0));
  CHECK_FALSE(p.keeps_another(10, 6, t0));
}

TEST_CASE("a pool forgets a burst after one to two quiet windows") {
  time_point t0{};
  pool_target p{256, 60s};
  p.record(64, t0);
  p.record(2, t0 + 61s); // a new bucket: the burst is the previous one
  CHECK(p.keep(t0 + 61s) == 64);
  CHECK(p.keep(t0 + 120s) == 64);
  CHECK(p.keep(t0 + 121s) == 2); // the burst's bucket has rolled out
  CHECK(p.keep(t0 + 300s) == 0); // nothing for two windows: keep nothing
}
