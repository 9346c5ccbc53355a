// Which attempt outcomes move a source's AIMD limit (the one place that
// decides it: aimd_limit::on_outcome).

#include "sluice/runtime/policy/aimd.hpp"

#include <catch2/catch.hpp>

using namespace sluice::policy;

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
