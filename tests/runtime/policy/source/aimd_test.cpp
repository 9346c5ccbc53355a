// Which attempt outcomes move a source's AIMD limit (the one place that
// decides it: aimd_limit::on_outcome).

#include "sluice/runtime/policy/source/aimd.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace sluice::policy;
using sluice::testing::refusal;

namespace {

aimd_limit limit_at(uint32_t initial) {
  aimd_config cfg;
  cfg.initial = initial;
  cfg.min = 1;
  cfg.max = 100;
  return aimd_limit{cfg};
}

} // namespace

TEST_CASE("a 429 and a timeout halve the limit, as drops") {
  for (auto kind : {outcome_kind::rate_limited, outcome_kind::timeout}) {
    auto l = limit_at(20);
    l.on_outcome(kind, 20);
    CHECK(l.limit() == 10);
  }
}

TEST_CASE("a success while the source is well used grows the limit") {
  auto l = limit_at(20);
  l.on_outcome(outcome_kind::ok, 20);
  CHECK(l.limit() == 40);            // slow start: twice the 20 in flight
  l.on_outcome(outcome_kind::ok, 2); // idle: proves nothing
  CHECK(l.limit() == 40);
}

TEST_CASE("a transient or permanent failure leaves the limit") {
  for (auto kind : {outcome_kind::transient, outcome_kind::permanent}) {
    auto l = limit_at(20);
    l.on_outcome(kind, 20);
    CHECK(l.limit() == 20);
  }
}

TEST_CASE("AIMD shrinks on drops and recovers on successes, within bounds") {
  aimd_config c;
  c.initial = 16;
  c.min = 2;
  c.max = 20;
  c.decrease_ratio = 0.5;
  aimd_limit l{c};
  l.on_drop();
  CHECK(l.limit() == 8);
  for (int i = 0; i < 10; ++i)
    l.on_drop();
  CHECK(l.limit() == 2); // never below min
  for (int i = 0; i < 100; ++i)
    l.on_success(l.limit());
  CHECK(l.limit() == 20); // never above max
}

TEST_CASE("AIMD grows only while the source is well used") {
  aimd_config c;
  c.initial = 10;
  aimd_limit l{c};
  l.on_success(2); // 2 of 10 in flight: proves nothing about 11
  CHECK(l.limit() == 10);
  l.on_success(5);
  CHECK(l.limit() == 11);
}

TEST_CASE("nonsense AIMD settings are refused, naming the field") {
  aimd_config a;
  a.decrease_ratio = 1.0;
  CHECK(refusal(a).rfind("decrease_ratio:", 0) == 0);
  a = {};
  a.min = 0;
  CHECK(refusal(a).rfind("min:", 0) == 0);
  a = {};
  a.initial = 1000;
  CHECK(refusal(a).rfind("initial:", 0) == 0);
}

TEST_CASE("reconfigure keeps the limit reached, brought into the new bounds") {
  auto l = limit_at(40);
  aimd_config wider;
  wider.initial = 2; // no longer matters
  wider.min = 1;
  wider.max = 200;
  l.reconfigure(wider);
  CHECK(l.limit() == 40);
  CHECK(l.config().max == 200);
  aimd_config lower = wider;
  lower.max = 16;
  l.reconfigure(lower);
  CHECK(l.limit() == 16);
  aimd_config higher = wider;
  higher.min = 50;
  higher.initial = 50;
  l.reconfigure(higher);
  CHECK(l.limit() == 50);
  aimd_config bad = wider;
  bad.decrease_ratio = 2;
  CHECK_THROWS_AS(l.reconfigure(bad), std::invalid_argument);
  CHECK(l.limit() == 50); // refused: nothing changed
}

namespace {

// A healthy upstream under `demand` callers that always have a call ready:
// every permit the limit grants is in use, so each success sees
// min(demand, limit) calls in flight. The successes it took for the limit
// to reach `target`, or -1 when `budget` successes were not enough.
int successes_to_reach(aimd_limit& l, uint32_t demand, uint32_t target,
                       int budget) {
  for (int n = 0; n < budget; ++n) {
    if (l.limit() >= target)
      return n;
    l.on_outcome(outcome_kind::ok, std::min(demand, l.limit()));
  }
  return l.limit() >= target ? budget : -1;
}

} // namespace

TEST_CASE("with the default settings, 64 callers on a healthy upstream get a "
          "limit of 64 within two successes (slow start)") {
  aimd_limit l{aimd_config{}}; // the shipped defaults: initial 16
  REQUIRE(l.limit() == 16);
  // 16 in flight succeed: 32; 32 in flight succeed: 64. The additive rule
  // alone took 48 successes (one per success from 16).
  CHECK(successes_to_reach(l, 64, 64, 1000) == 2);
  // It settles where the additive rule would have ended too (growth stops
  // once fewer than half the permits are used): slow start makes the climb
  // faster, not the ceiling higher.
  for (int i = 0; i < 1000; ++i)
    l.on_outcome(outcome_kind::ok, std::min(64u, l.limit()));
  CHECK(l.limit() == 129);
}

TEST_CASE("slow start grows to at most twice the calls seen in flight, and "
          "never past max") {
  aimd_config c;
  c.initial = 10;
  c.max = 100;
  aimd_limit l{c};
  l.on_success(4); // under half in use: proves nothing
  CHECK(l.limit() == 10);
  l.on_success(7); // 7 in flight succeed: 14, not 20
  CHECK(l.limit() == 14);
  l.on_success(14);
  CHECK(l.limit() == 28);
  l.on_success(28);
  l.on_success(56);
  CHECK(l.limit() == 100);
}

TEST_CASE("after the first drop the limit grows additively, for good") {
  aimd_config c;
  c.initial = 40;
  c.max = 1000;
  aimd_limit l{c};
  l.on_outcome(outcome_kind::rate_limited, 40);
  CHECK(l.limit() == 20);
  l.on_outcome(outcome_kind::ok, 20);
  CHECK(l.limit() == 21); // one step, not a doubling
  // A reload proves nothing about the upstream: still additive after it.
  l.reconfigure(c);
  l.on_outcome(outcome_kind::ok, 21);
  CHECK(l.limit() == 22);
  // A transient failure or a permanent error is no drop: a fresh limit
  // that sees only those stays in slow start.
  aimd_limit fresh{c};
  fresh.on_outcome(outcome_kind::transient, 40);
  fresh.on_outcome(outcome_kind::permanent, 40);
  fresh.on_outcome(outcome_kind::ok, 40);
  CHECK(fresh.limit() == 80);
}

TEST_CASE("slow_start = false grows one increase per success from the "
          "start") {
  aimd_config c;
  c.slow_start = false;
  aimd_limit l{c};
  CHECK_FALSE(l.in_slow_start());
  CHECK(successes_to_reach(l, 64, 64, 1000) == 48);
  // Turned on by a reload before any drop: slow start from there.
  c.slow_start = true;
  l.reconfigure(c);
  CHECK(l.in_slow_start());
  l.on_success(64);
  CHECK(l.limit() == 128);
}
