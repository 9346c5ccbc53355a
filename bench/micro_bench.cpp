// Micro benchmarks of the pure policy classes on the hot path of every call
// (Google Benchmark). Targets (issue 6): breaker is_open() <= 5 ns.
//
//   micro_bench [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]

#include <atomic>
#include <chrono>
#include <thread>

#include <benchmark/benchmark.h>

#include "sluice/runtime/policy/source/aimd.hpp"
#include "sluice/runtime/policy/call/backoff.hpp"
#include "sluice/runtime/policy/breaker/breaker_mirror.hpp"
#include "sluice/runtime/policy/breaker/breaker_policy.hpp"
#include "sluice/runtime/policy/call/stall_clock.hpp"
#include "sluice/runtime/policy/admission/tier_counter.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::policy;

// The check every governor makes before it asks a breaker: one acquire load.
void breaker_is_open(benchmark::State& st) {
  breaker_mirror m;
  for (auto _ : st)
    benchmark::DoNotOptimize(m.is_open());
}
BENCHMARK(breaker_is_open);

// The same while another thread publishes a transition every 100 us.
void breaker_is_open_with_writer(benchmark::State& st) {
  static breaker_mirror m;
  static std::atomic<bool> stop{false};
  std::thread writer;
  if (st.thread_index() == 0) {
    stop = false;
    writer = std::thread{[] {
      uint64_t gen = 1;
      while (!stop) {
        ++gen;
        m.publish(gen % 2 ? breaker_state::open : breaker_state::closed, gen);
        std::this_thread::sleep_for(100us);
      }
    }};
  }
  for (auto _ : st)
    benchmark::DoNotOptimize(m.is_open());
  if (st.thread_index() == 0) {
    stop = true;
    writer.join();
  }
}
BENCHMARK(breaker_is_open_with_writer);

// Recording an outcome in a closed breaker (count window of 50, 1 in 10
// failing: stays closed).
void record_outcomes(benchmark::State& st, const breaker_config& cfg) {
  breaker_policy p{cfg};
  time_point now{};
  uint64_t i = 0;
  for (auto _ : st) {
    now += 1ms;
    benchmark::DoNotOptimize(p.record(p.generation(), ++i % 10 == 0, 5ms, now));
  }
}

void breaker_record(benchmark::State& st) {
  record_outcomes(st, breaker_config{});
}
BENCHMARK(breaker_record);

// The same with a time window (30 one-second buckets).
void breaker_record_time_window(benchmark::State& st) {
  breaker_config cfg;
  cfg.window = breaker_config::window_kind::time;
  record_outcomes(st, cfg);
}
BENCHMARK(breaker_record_time_window);

// One attempt's accounting: begin, end (every fourth a refunded 429), and
// the stall reading a governor takes.
void stall_clock_attempt(benchmark::State& st) {
  time_point now{};
  stall_clock c{now};
  uint64_t i = 0;
  for (auto _ : st) {
    now += 1ms;
    auto id = c.begin_attempt(now);
    now += 2ms;
    c.end_attempt(id, now, ++i % 4 == 0);
    benchmark::DoNotOptimize(c.stalled(now));
  }
}
BENCHMARK(stall_clock_attempt);

void backoff_decision(benchmark::State& st) {
  backoff_config cfg{1s, 30s, 0.5};
  uint32_t fails = 0;
  double u = 0.37;
  for (auto _ : st) {
    fails = fails % 8 + 1;
    benchmark::DoNotOptimize(backoff_delay(cfg, fails, u));
  }
}
BENCHMARK(backoff_decision);

void backoff_decision_retry_after(benchmark::State& st) {
  backoff_config cfg{1s, 30s, 0.5};
  for (auto _ : st)
    benchmark::DoNotOptimize(
        backoff_delay(cfg, 2, 0.37, std::optional<duration>{7s}));
}
BENCHMARK(backoff_decision_retry_after);

void aimd_decision(benchmark::State& st) {
  aimd_config cfg;
  aimd_limit a{cfg};
  uint64_t i = 0;
  for (auto _ : st) {
    if (++i % 50 == 0)
      a.on_drop();
    else
      a.on_success(a.limit());
    benchmark::DoNotOptimize(a.limit());
  }
}
BENCHMARK(aimd_decision);

// A tier permit taken and given back on the fast path (one CAS each), one
// thread and contended by two.
void tier_acquire_release(benchmark::State& st) {
  static tier_counter t{1024};
  for (auto _ : st) {
    if (t.try_acquire())
      benchmark::DoNotOptimize(t.release());
  }
}
BENCHMARK(tier_acquire_release)->Threads(1)->Threads(2);

} // namespace

BENCHMARK_MAIN();
