// Randomised invariant test in virtual time: hundreds of holders acquiring,
// releasing, timing out and being killed in random order over five minutes
// of virtual time. After every step, every tier's counts must match exactly
// what the live holders believe they hold and wait for.

#include <chrono>
#include <random>
#include <vector>

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/admission.hpp"
#include "admission_holder.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

struct tracked {
  holder h;
  admission_path path;
  bool alive = true;
};

bool same_tier(const tier_handle& a, const tier_handle& b) {
  return a.counter == b.counter;
}

// Checks one tier against the holders' own view of the world.
void check_tier(const tier_handle& tier, const std::vector<tracked>& all) {
  uint32_t holding = 0;
  uint32_t queued = 0;
  for (auto& t : all) {
    if (!t.alive)
      continue;
    const auto& mine = t.path[tier.kind];
    if (!same_tier(mine, tier))
      continue;
    if (t.h.report->holding(tier.kind))
      ++holding;
    if (t.h.report->waiting_on() == tier.kind)
      ++queued;
  }
  auto s = tier.status();
  INFO(to_string(tier.kind) << " tier, cap " << s.cap);
  REQUIRE(s.in_use <= s.cap);
  REQUIRE(s.in_use == holding);
  REQUIRE(s.waiting == queued);
}

} // namespace

TEST_CASE_METHOD(virtual_time_fixture,
                 "randomised admission keeps every count exact") {
  auto seed = GENERATE(1u, 2u, 3u, 42u);
  INFO("seed " << seed);
  std::mt19937 rng{seed};
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>{0, n - 1}(rng);
  };
  auto grid = tier_grid::spawn(sys, 3, 2, 2, 3, 4);
  const auto& sessions = grid.sessions;
  const auto& connections = grid.connections;
  const auto& global = grid.global;
  const auto& tiers = grid.all;

  std::vector<tracked> all;
  auto live_where = [&](auto pred) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].alive && pred(all[i]))
        idx.push_back(i);
    return idx;
  };
  auto t0 = now();
  size_t admitted = 0, rejected = 0, killed = 0;
  for (int step = 0; step < 800; ++step) {
    auto roll = pick(100);
    if (roll < 40) { // a new call
      admission_path p{sessions[pick(sessions.size())],
                       connections[pick(connections.size())], global};
      auto h = spawn_holder(sys, p, 3s);
      caf::anon_send(h.actor, ask_atom::value);
      all.push_back({h, p});
    } else if (roll < 60) { // a call completes
      auto idx = live_where([](auto& t) { return t.h.report->admitted; });
      if (!idx.empty()) {
        auto& t = all[idx[pick(idx.size())]];
        caf::anon_send(t.h.actor, finish_atom::value);
        t.alive = false;
      }
    } else if (roll < 70) { // a call is cancelled, holding or waiting
      auto idx = live_where([](auto&) { return true; });
      if (!idx.empty()) {
        auto& t = all[idx[pick(idx.size())]];
        caf::anon_send_exit(t.h.actor, caf::exit_reason::kill);
        t.alive = false;
        ++killed;
      }
    } else { // time passes; some waiters time out
      advance(std::chrono::milliseconds(pick(800)));
    }
    run();
    for (auto& t : all)
      if (t.alive && t.h.report->decided && !t.h.report->admitted)
        t.alive = false; // rejected calls end
    for (auto& tier : tiers)
      check_tier(tier, all);
  }
  for (auto& t : all) {
    admitted += t.h.report->admitted ? 1 : 0;
    rejected += t.h.report->busy() ? 1 : 0;
  }
  // The scenario must exercise every path, or the invariant proves little.
  CHECK(admitted > 50);
  CHECK(rejected > 10);
  CHECK(killed > 20);
  CHECK(now() - t0 > 60s);

  for (auto& t : all)
    if (t.alive)
      caf::anon_send(t.h.actor, finish_atom::value);
  advance(10s);
  for (auto& tier : tiers) {
    CHECK(tier.status().in_use == 0);
    CHECK(tier.status().waiting == 0);
  }
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "a 300-second admission scenario runs in virtual time") {
  // One call every 500 ms for five minutes, each holding its permits for
  // 2 s, against a global cap of 3: calls queue, some time out at exactly
  // their deadline, and everything comes back at the end.
  auto sessions = spawn_tier(sys, tier_kind::session, 16);
  auto connection = spawn_tier(sys, tier_kind::connection, 256);
  auto global = spawn_tier(sys, tier_kind::global, 3);
  admission_path p{sessions, connection, global};
  std::vector<holder> calls;
  std::vector<time_point> asked;
  std::vector<bool> finished;
  auto t0 = now();
  while (now() - t0 < 300s) {
    auto h = spawn_holder(sys, p, 3s);
    caf::anon_send(h.actor, ask_atom::value);
    run();
    calls.push_back(h);
    asked.push_back(now());
    finished.push_back(false);
    // Calls admitted 2 s ago or more finish.
    for (size_t i = 0; i < calls.size(); ++i) {
      auto& r = *calls[i].report;
      if (!finished[i] && r.admitted && now() - r.decided_at >= 2s) {
        caf::anon_send(calls[i].actor, finish_atom::value);
        finished[i] = true;
      }
    }
    advance(500ms);
    REQUIRE(global.status().in_use <= 3);
  }
  advance(10s);
  for (size_t i = 0; i < calls.size(); ++i)
    if (!finished[i])
      caf::anon_send(calls[i].actor, finish_atom::value);
  run();
  size_t busy = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    REQUIRE(calls[i].report->decided);
    if (!calls[i].report->admitted) {
      ++busy;
      // Every rejection came exactly one wait_timeout after the ask.
      CHECK(calls[i].report->decided_at - asked[i] == 3s);
    }
  }
  CHECK(calls.size() == 600);
  CHECK(busy > 0);
  CHECK(global.status().in_use == 0);
  CHECK(global.status().waiting == 0);
  CHECK(sessions.status().in_use == 0);
}
