// Governed calls on CAF's real scheduler, through the embedding facade:
// spawn governor, admit (three tiers), select, attempt, record, release,
// reply -- against zero-latency simulated sources.
//
//   [SLUICE_BENCH_SCHEDULER=loops|sharing|stealing] [SLUICE_BENCH_THREADS=n]
//   (loops: the event loops sluice-node runs on, SLUICE_BENCH_THREADS of
//   them, default one per core)
//   [SLUICE_BENCH_IN_FLIGHT=1000,10000,100000]
//   governed_calls [calls_per_row] [max_in_flight] [parked] [repetitions]
//                  (defaults 200000, 100000, max_in_flight and 3; small
//                  numbers smoke; each row prints the median repetition)
//
// Prints, in one run:
// - throughput of a closed loop with 1k, 10k and 100k calls in flight
//   (the cost per call: wall time x cores / calls);
// - the same with 10 and 1,000 sources on the route (each source breaker-
//   guarded; the governor takes the first runnable one);
// - memory per in-flight call: RSS growth with 100,000 calls parked on a
//   source that never answers, divided by 100,000.
// Targets (issue 6): >= 200k calls/s; cost flat within 1.5x from 1k to 100k
// in flight; <= 4 KiB per in-flight call.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <fmt/core.h>
#include <unistd.h>

#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/runtime.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;

long rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

runtime_config big_config() {
  runtime_config cfg;
  cfg.admission.session_cap = 1 << 20;
  cfg.admission.connection_cap = 1 << 20;
  cfg.admission.global_cap = 1 << 20;
  cfg.admission.wait_timeout = 60s;
  auto& k = cfg.kinds["chat"];
  k.max_attempts = 1;
  k.attempt_timeout = 600s;
  k.stall_window = 600s;
  return cfg;
}

source_settings roomy() {
  source_settings s;
  s.aimd.initial = s.aimd.max = 1 << 20;
  s.breaker.window_size = 1000;
  s.breaker.min_samples = 1000;
  return s;
}

sim_config zero_latency(double hang = 0) {
  sim_config c;
  c.phases[0].latency_min = c.phases[0].latency_max = duration::zero();
  c.phases[0].hang_rate = hang;
  return c;
}

// A closed loop: `in_flight` calls at all times until `total` are done.
// Returns calls per second.
double closed_loop(runtime& rt, const std::string& route, long in_flight,
                   long total) {
  std::atomic<long> started{0}, finished{0}, failed{0};
  std::mutex mx;
  std::condition_variable cv;
  bool done = total <= 0; // under mx
  std::function<void()> start_one;
  start_one = [&] {
    if (started.fetch_add(1) >= total)
      return;
    call_options opts;
    opts.session = "bench";
    rt.call(call_request{route, "{}"},
            [&](call_result r) {
              if (!r.ok())
                ++failed;
              // The next call first: once `finished` reaches `total` the
              // caller returns and these locals are gone, so nothing may
              // touch them after the count (a call finishing late used to
              // run a destroyed `start_one`: a 1-in-6 segfault).
              start_one();
              if (finished.fetch_add(1) + 1 == total) {
                std::lock_guard<std::mutex> guard{mx};
                done = true; // the caller leaves only once this is unlocked
                cv.notify_all();
              }
            },
            opts);
  };
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < std::min(in_flight, total); ++i)
    start_one();
  {
    std::unique_lock<std::mutex> guard{mx};
    cv.wait(guard, [&] { return done; });
  }
  std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
  if (failed > 0)
    fmt::print("  ({} calls failed)\n", failed.load());
  return static_cast<double>(total) / d.count();
}

} // namespace

int main(int argc, char** argv) {
  long total = argc > 1 ? std::atol(argv[1]) : 200'000;
  long max_in_flight = argc > 2 ? std::atol(argv[2]) : 100'000;
  long parked = argc > 3 ? std::atol(argv[3]) : max_in_flight;
  int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  caf::actor_system_config caf_cfg;
  add_error_category(caf_cfg);
  // Optional: SLUICE_BENCH_SCHEDULER=loops (the loop scheduler) or
  // sharing|stealing (CAF's scheduler).
  auto policy = std::getenv("SLUICE_BENCH_SCHEDULER");
  auto threads_env = std::getenv("SLUICE_BENCH_THREADS");
  if (policy != nullptr && std::string{policy} == "loops") {
    use_loop_scheduler(caf_cfg, threads_env != nullptr
                                    ? static_cast<size_t>(std::atol(threads_env))
                                    : std::thread::hardware_concurrency());
    policy = nullptr;
    threads_env = nullptr;
  }
  if (policy != nullptr)
    caf_cfg.set("scheduler.policy", caf::atom_from_string(policy));
  // Optional: SLUICE_BENCH_THREADS=n CAF workers (CAF's default: at least 4;
  // sluice-node runs one per core).
  if (auto threads = threads_env)
    caf_cfg.set("scheduler.max-threads",
                static_cast<size_t>(std::atol(threads)));
  caf::actor_system sys{caf_cfg};
  auto cores = std::thread::hardware_concurrency();
  fmt::print("governed calls, real scheduler, {} cores, {} calls per row\n",
             cores, total);
  {
    // Memory: calls parked on a source that never answers.
    runtime rt{sys, big_config()};
    auto hang = rt.add_simulated_source("hang", zero_latency(1.0), roomy());
    rt.add_route({"/hang", "chat", {"hang"}, {}, {}});
    std::this_thread::sleep_for(200ms);
    auto before = rss_bytes();
    std::vector<call_handle> calls;
    calls.reserve(parked);
    call_options opts;
    opts.session = "parked";
    for (long i = 0; i < parked; ++i)
      calls.push_back(
          rt.call(call_request{"/hang", "{}"}, [](call_result) {}, opts));
    while (hang.stats->in_flight < parked)
      std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(200ms);
    auto after = rss_bytes();
    fmt::print("memory per in-flight call: {:.0f} bytes ({} calls parked, RSS "
               "+{:.1f} MiB)\n",
               static_cast<double>(after - before) / parked, parked,
               (after - before) / 1048576.0);
    // Cancelling them all gives everything back (and must not take long).
    auto t0 = std::chrono::steady_clock::now();
    for (auto& c : calls)
      c.cancel();
    while (hang.stats->in_flight > 0)
      std::this_thread::sleep_for(1ms);
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
    fmt::print("cancelling {} parked calls: {:.2f} s\n", parked, d.count());
  }
  {
    runtime rt{sys, big_config()};
    rt.add_simulated_source("s", zero_latency(), roomy());
    rt.add_route({"/one", "chat", {"s"}, {}, {}});
    std::vector<std::string> ten, thousand;
    for (int i = 0; i < 1000; ++i) {
      auto name = "s" + std::to_string(i);
      rt.add_simulated_source(name, zero_latency(), roomy());
      if (i < 10)
        ten.push_back(name);
      thousand.push_back(name);
    }
    rt.add_route({"/ten", "chat", ten, {}, {}});
    rt.add_route({"/thousand", "chat", thousand, {}, {}});
    // Rates on a shared 2-core machine move a lot from one run to the next:
    // each row runs `reps` times and reports the median, with the range.
    fmt::print("{:<26} {:>12} {:>14} {:>22}\n", "route, calls in flight",
               "calls/s", "ns/call/core", "range of calls/s");
    auto row = [&](const std::string& route, long in_flight) {
      std::vector<double> rates;
      for (int i = 0; i < reps; ++i)
        rates.push_back(closed_loop(rt, route, in_flight, total));
      std::sort(rates.begin(), rates.end());
      auto median = rates[rates.size() / 2];
      fmt::print("{:<26} {:>12.0f} {:>14.0f} {:>10.0f} - {:<10.0f}\n",
                 route + ", " + std::to_string(in_flight), median,
                 1e9 * cores / median, rates.front(), rates.back());
    };
    // Optional: SLUICE_BENCH_IN_FLIGHT=1000,2000,... other depths for the
    // one-source rows (e.g. to find where cost per call steps up).
    std::vector<long> depths{1'000L, 10'000L, 100'000L};
    if (auto list = std::getenv("SLUICE_BENCH_IN_FLIGHT")) {
      depths.clear();
      for (const char* p = list; *p != '\0';) {
        char* end = nullptr;
        depths.push_back(std::strtol(p, &end, 10));
        p = *end == ',' ? end + 1 : end + (*end != '\0');
        if (end == p && *p == '\0')
          break;
      }
    }
    for (long n : depths)
      if (n > 0 && n <= max_in_flight)
        row("/one", std::min(n, total));
    row("/ten", std::min(1'000L, total));
    row("/thousand", std::min(1'000L, total));
  }
  return 0;
}
