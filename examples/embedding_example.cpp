// Embedding Sluice in a C++ service, without touching actors: build the
// runtime from a config, register two simulated upstreams and a route, and
// make calls through futures. The primary upstream fails hard for three
// seconds in the middle: watch calls fail over to the backup, the primary's
// breaker open, probe and close again.

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <fmt/core.h>

#include "sluice/messages/errors.hpp"
#include "sluice/runtime/runtime.hpp"

using namespace std::chrono_literals;

namespace {

sluice::sim_phase phase(sluice::duration length, double transient_rate) {
  sluice::sim_phase p;
  p.length = length;
  p.latency_min = 20ms;
  p.latency_max = 60ms;
  p.transient_rate = transient_rate;
  return p;
}

} // namespace

int main() {
  caf::actor_system_config caf_cfg;
  sluice::add_error_category(caf_cfg);
  caf::actor_system sys{caf_cfg};

  // 1. The runtime, from a config struct.
  sluice::runtime_config cfg;
  auto& chat = cfg.kinds["chat"];
  chat.max_attempts = 3;
  chat.backoff = {50ms, 500ms, 0.5};
  chat.attempt_timeout = 2s;
  chat.stall_window = 10s;
  sluice::runtime rt{sys, cfg};

  // 2. Sources: a primary that is healthy for 2 s, fails every call for 3 s,
  //    then recovers; and a healthy backup.
  sluice::source_settings settings;
  settings.breaker.window_size = 10;
  settings.breaker.min_samples = 4;
  settings.breaker.open_duration = 1s;
  sluice::sim_config primary;
  primary.phases = {phase(2s, 0.0), phase(3s, 1.0), phase({}, 0.0)};
  primary.seed = 42;
  auto primary_sim = rt.add_simulated_source("primary", primary, settings);
  sluice::sim_config backup;
  backup.phases = {phase({}, 0.0)};
  backup.seed = 7;
  rt.add_simulated_source("backup", backup, settings);

  // 3. A route: primary preferred, backup on failover.
  rt.add_route({"chat", "chat", {"primary", "backup"}, {}, {}});

  // 4. Calls. Each future delivers exactly one call_result.
  std::map<std::string, int> answered_by;
  int failed = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 70; ++i) {
    auto result = rt.call(sluice::call_request{
                              "chat", R"({"n":)" + std::to_string(i) + "}"})
                      .get();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
    auto breaker = rt.source("primary").breaker.mirror->load().state;
    if (result.ok()) {
      ++answered_by[result.source];
      fmt::print("[{:>5} ms] call {:>2}: ok from {:<7} after {} attempt(s); "
                 "primary breaker {}\n",
                 ms, i, result.source, result.attempts.size(),
                 sluice::policy::to_string(breaker));
    } else {
      ++failed;
      fmt::print("[{:>5} ms] call {:>2}: {} {}\n", ms, i,
                 sluice::to_string(result.status), result.reason);
    }
    std::this_thread::sleep_for(60ms);
  }
  fmt::print("\nanswered by primary: {}, by backup: {}, failed: {}\n",
             answered_by["primary"], answered_by["backup"], failed);
  fmt::print("primary saw {} attempts; its breaker kept the rest away\n",
             primary_sim.stats->attempts.load());
  std::fflush(stdout);
  return failed == 0 && answered_by["backup"] > 0 && answered_by["primary"] > 0
             ? 0
             : 1;
}
