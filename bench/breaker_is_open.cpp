// Cost of `is_open()` on a breaker's lock-free mirror, read in a tight loop
// by one thread, with and without a writer publishing transitions meanwhile.
//
//   breaker_is_open [iterations]
//
// Target (issue 6): <= 5 ns per check. Issue 6 moves this to Google
// Benchmark.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/core.h>

#include "runtime/policy/breaker_mirror.hpp"

using sluice::policy::breaker_mirror;
using sluice::policy::breaker_state;

namespace {

double ns_per_check(const breaker_mirror& m, long n, long& opens) {
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i)
    opens += m.is_open() ? 1 : 0;
  std::chrono::duration<double, std::nano> d =
      std::chrono::steady_clock::now() - t0;
  return d.count() / static_cast<double>(n);
}

} // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 200'000'000;
  breaker_mirror m;
  long opens = 0;
  auto quiet = ns_per_check(m, n, opens);
  fmt::print("is_open(), no writer:               {:.2f} ns/check\n", quiet);

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    uint64_t gen = 1;
    while (!stop) {
      ++gen;
      m.publish(gen % 2 ? breaker_state::open : breaker_state::closed, gen);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  auto busy = ns_per_check(m, n, opens);
  stop = true;
  writer.join();
  fmt::print("is_open(), writer every 100 us:     {:.2f} ns/check  "
             "({} opens seen)\n",
             busy, opens);
  return 0;
}
