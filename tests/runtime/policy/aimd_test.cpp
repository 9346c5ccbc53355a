// Which attempt outcomes move a source's AIMD limit (the one place that
// decides it: aimd_limit::on_outcome).

#include "sluice/runtime/policy/aimd.hpp"

#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "policy_testing.hpp"

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
  CHECK(l.limit() == 21);
  l.on_outcome(outcome_kind::ok, 2); // idle: proves nothing
  CHECK(l.limit() == 21);
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
