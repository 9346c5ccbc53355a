#include "sluice/runtime/policy/breaker/probe_leases.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/breaker/breaker_policy.hpp"

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;
using sluice::time_point;
using sluice::testing::t0;

namespace {

using verdict = probe_grant::verdict;
using action = claim_verdict::action;

constexpr duration period = 30s;

// A breaker opened by five failures at t0, open until t0 + 30 s.
breaker_policy open_breaker() {
  breaker_config c;
  c.window_size = 10;
  c.min_samples = 5;
  c.open_duration = period;
  breaker_policy b{c};
  for (int i = 0; i < 5; ++i)
    b.record(b.generation(), true, 1ms, t0);
  return b;
}

} // namespace

TEST_CASE("probe leases: one probe at a time, the next told when the first lapses") {
  probe_leases ls;
  auto a = ls.try_grant(7, t0, 1, period, false);
  REQUIRE(a.what == verdict::granted);
  CHECK(a.lease.id != 0);
  CHECK(a.lease.holder == 7);
  CHECK(a.lease.expires == t0 + period);
  auto b = ls.try_grant(8, t0 + 5s, 1, period, false);
  CHECK(b.what == verdict::refused);
  CHECK(b.retry_at == t0 + period); // the first lease's end, not 5 s + 30 s
  CHECK(ls.size() == 1);
}

TEST_CASE("probe leases: the limit counts leases, and ids are never reused") {
  probe_leases ls;
  auto a = ls.try_grant(1, t0, 2, period, false);
  auto b = ls.try_grant(2, t0, 2, period, false);
  REQUIRE(a.what == verdict::granted);
  REQUIRE(b.what == verdict::granted);
  CHECK(a.lease.id != b.lease.id);
  CHECK(ls.try_grant(3, t0, 2, period, false).what == verdict::refused);
  CHECK(ls.release(a.lease.id) == 1u);
  auto c = ls.try_grant(3, t0, 2, period, false);
  REQUIRE(c.what == verdict::granted);
  CHECK(c.lease.id != a.lease.id);
  CHECK(c.lease.id != b.lease.id);
}

TEST_CASE("probe leases: an anonymous caller never holds a probe") {
  probe_leases ls;
  auto g = ls.try_grant(std::nullopt, t0, 5, period, false);
  CHECK(g.what == verdict::refused);
  CHECK(g.retry_at == t0 + period);
  CHECK(ls.size() == 0);
}

TEST_CASE("probe leases: a released or expired lease is gone, twice is nothing") {
  probe_leases ls;
  auto g = ls.try_grant(4, t0, 1, period, false);
  REQUIRE(ls.find(g.lease.id) != nullptr);
  CHECK(ls.release(g.lease.id) == 4u);
  CHECK(ls.find(g.lease.id) == nullptr);
  CHECK_FALSE(ls.release(g.lease.id));
  CHECK_FALSE(ls.release(12345));
}

TEST_CASE("probe leases: a dead holder frees every lease it held") {
  probe_leases ls;
  ls.try_grant(1, t0, 3, period, false);
  ls.try_grant(1, t0, 3, period, false);
  auto other = ls.try_grant(2, t0, 3, period, false);
  CHECK(ls.holds(1));
  ls.drop_holder(1);
  CHECK_FALSE(ls.holds(1));
  CHECK(ls.size() == 1);
  CHECK(ls.find(other.lease.id) != nullptr);
}

TEST_CASE("probe leases: leaving half-open clears them and names each holder once") {
  probe_leases ls;
  ls.try_grant(1, t0, 3, period, false);
  ls.try_grant(2, t0, 3, period, false);
  ls.try_grant(1, t0, 3, period, false);
  auto holders = ls.clear();
  CHECK(holders == std::vector<uint64_t>{1, 2});
  CHECK(ls.size() == 0);
  CHECK(ls.clear().empty());
}

TEST_CASE("probe leases: soonest is the earliest expiry or the fallback") {
  probe_leases ls;
  CHECK(ls.soonest(t0 + 1s) == t0 + 1s);
  ls.try_grant(1, t0 + 10s, 3, period, false);
  ls.try_grant(2, t0, 3, period, false);
  CHECK(ls.soonest(t0 + 1h) == t0 + period);
  CHECK(ls.soonest(t0 + 1s) == t0 + 1s);
}

TEST_CASE("probe leases: shared, a probe waits for this node's cluster lease") {
  probe_leases ls;
  auto g = ls.try_grant(1, t0, 1, period, true);
  CHECK(g.what == verdict::claim_first);
  CHECK(g.retry_at == t0 + probe_leases::claim_wait);
  CHECK(ls.size() == 0);
  // An anonymous ask is refused without a claim.
  CHECK(ls.try_grant(std::nullopt, t0, 1, period, true).what ==
        verdict::refused);
}

TEST_CASE("probe leases: one claim per generation at a time") {
  probe_leases ls;
  CHECK(ls.should_claim(2));
  CHECK_FALSE(ls.should_claim(2));
  // A newer generation claims again; the old claim no longer counts.
  CHECK(ls.should_claim(3));
  auto b = open_breaker();
  ls.on_claim(3, duration::zero(), t0, b);
  CHECK(ls.should_claim(3));
}

TEST_CASE("probe leases: a claim won half-opens and lets probes through for one open period") {
  auto b = open_breaker();
  probe_leases ls;
  auto now = t0 + period;
  REQUIRE(ls.should_claim(b.generation()));
  auto v = ls.on_claim(b.generation(), duration::zero(), now, b);
  CHECK(v.what == action::half_open);
  CHECK_FALSE(ls.cluster_lease_lapsed(now + period - 1ms));
  CHECK(ls.cluster_lease_lapsed(now + period));
  CHECK(ls.try_grant(1, now + 1s, 1, period, true).what == verdict::granted);
}

TEST_CASE("probe leases: Redis silent, the node decides alone as if it won") {
  auto b = open_breaker();
  probe_leases ls;
  auto v = ls.on_claim(b.generation(), duration{-1}, t0 + period, b);
  CHECK(v.what == action::half_open);
}

TEST_CASE("probe leases: another node probing holds this one open for its lease's rest") {
  auto b = open_breaker();
  probe_leases ls;
  auto now = t0 + period;
  auto v = ls.on_claim(b.generation(), 12s, now, b);
  CHECK(v.what == action::hold_until);
  CHECK(v.until == now + 12s);
  // Not ours: the next call still has to claim.
  CHECK(ls.try_grant(1, now, 1, period, true).what == verdict::claim_first);
}

TEST_CASE("probe leases: a claim answered after the breaker moved on is ignored") {
  auto b = open_breaker();
  probe_leases ls;
  auto old = b.generation();
  // Another generation.
  b.close_from_peer(t0 + 1s);
  CHECK(ls.on_claim(old, duration::zero(), t0 + 2s, b).what == action::ignore);
  // Closed, same generation.
  CHECK(ls.on_claim(b.generation(), duration::zero(), t0 + 2s, b).what ==
        action::ignore);
  // Isolated.
  b.isolate(t0 + 3s);
  CHECK(ls.on_claim(b.generation(), duration::zero(), t0 + 4s, b).what ==
        action::ignore);
  CHECK(ls.cluster_lease_lapsed(t0 + 4s));
}
