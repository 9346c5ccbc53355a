// Thousands of governed calls on CAF's real, multi-threaded scheduler against
// flaky simulated sources, with random cancellations. Every call must end in
// exactly one result (or be cancelled), and every count must return to zero.
// No timing is asserted.

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/runtime.hpp"

using namespace std::chrono_literals;
using namespace sluice;

namespace {

sim_config flaky(uint64_t seed) {
  sim_config s;
  s.seed = seed;
  auto& p = s.phases[0];
  p.latency_min = 0ms;
  p.latency_max = 2ms;
  p.transient_rate = 0.2;
  p.rate_limit_rate = 0.1;
  p.permanent_rate = 0.02;
  p.hang_rate = 0.02;
  return s;
}

} // namespace

TEST_CASE("thousands of concurrent calls each end exactly once and leave "
          "nothing behind") {
  caf::actor_system_config caf_cfg;
  add_error_category(caf_cfg);
  caf::actor_system sys{caf_cfg};
  // The system waits for every actor at shutdown, including tier owners
  // whose deadline timers are still pending: a short wait_timeout keeps that
  // wait short (and LeakSanitizer sees every actor cleaned up).
  runtime_config cfg;
  cfg.seed = 11;
  cfg.admission.global_cap = 256;
  cfg.admission.session_cap = 64;
  cfg.admission.wait_timeout = 1s;
  auto& chat = cfg.kinds["chat"];
  chat.max_attempts = 3;
  chat.stall_window = 300ms;
  chat.attempt_timeout = 30ms;
  chat.backoff = {1ms, 10ms, 0.5};
  chat.poll_interval = 5ms;
  runtime rt{sys, cfg};
  source_settings settings;
  settings.breaker.window_size = 20;
  settings.breaker.min_samples = 10;
  settings.breaker.open_duration = 20ms;
  // The simulated 429s are random, not a sign of load: keep AIMD from
  // throttling the whole test down to a few calls at a time.
  settings.aimd.initial = 64;
  settings.aimd.min = 16;
  settings.aimd.max = 128;
  std::vector<simulated_source> sims;
  for (int i = 0; i < 3; ++i)
    sims.push_back(rt.add_simulated_source("s" + std::to_string(i),
                                           flaky(100 + i), settings));
  rt.add_route({"chat", "chat", {"s0", "s1", "s2"}, {}, {}});

  constexpr int calls = 3000;
  std::vector<std::atomic<int>> answers(calls);
  std::atomic<int> finished{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> ok{0};
  std::vector<std::atomic<int>> by_status(8);
  std::vector<std::atomic<int>> busy_by_tier(3);
  std::vector<call_handle> handles(calls);
  std::mt19937 rng{5};
  for (int i = 0; i < calls; ++i) {
    call_options o;
    o.session = "session-" + std::to_string(i % 40);
    handles[i] = rt.call(
        call_request{"chat", "{}"},
        [&, i](call_result r) {
          if (r.status == call_status::cancelled)
            ++cancelled;
          if (r.ok())
            ++ok;
          ++by_status[static_cast<size_t>(r.status)];
          if (r.busy_tier)
            ++busy_by_tier[static_cast<size_t>(*r.busy_tier)];
          ++answers[i];
          ++finished;
        },
        o);
    // Cancel about one call in ten, some long after they started.
    if (rng() % 10 == 0)
      handles[rng() % (i + 1)].cancel();
  }
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (finished < calls && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  REQUIRE(finished == calls);
  for (int i = 0; i < calls; ++i) {
    INFO("call " << i);
    REQUIRE(answers[i] == 1); // exactly one result per call
  }
  for (size_t i = 0; i < by_status.size(); ++i)
    if (by_status[i] > 0)
      UNSCOPED_INFO(to_string(static_cast<call_status>(i))
                    << ": " << by_status[i]);
  for (size_t i = 0; i < 3; ++i)
    UNSCOPED_INFO("busy at " << to_string(static_cast<tier_kind>(i)) << ": "
                             << busy_by_tier[i]);
  CHECK(ok > calls / 2);
  CHECK(cancelled > 0);

  // Everything returns to idle (queued waiters of cancelled calls leave when
  // their tier processes the down message; give it a moment).
  auto idle = [&] {
    if (rt.tiers().global().status().in_use != 0)
      return false;
    for (auto& s : rt.sources())
      if (s.tier->load().in_use != 0)
        return false;
    for (auto& sim : sims)
      if (sim.stats->in_flight != 0)
        return false;
    return true;
  };
  deadline = std::chrono::steady_clock::now() + 10s;
  while (!idle() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  CHECK(rt.tiers().global().status().in_use == 0);
  CHECK(rt.tiers().global().status().waiting == 0);
  for (auto& s : rt.sources()) {
    INFO("source " << s.name);
    CHECK(s.tier->load().in_use == 0);
    caf::scoped_actor self{sys};
    self->request(s.breaker.actor, 5s, status_atom_v)
        .receive([](const breaker_status& st) { CHECK(st.leases_held == 0); },
                 [](caf::error&) { FAIL("no breaker status"); });
  }
  for (auto& sim : sims)
    CHECK(sim.stats->in_flight == 0);
}
