// The breaker mirror read from real threads while a writer drives the state
// machine through its transitions. Runs under ThreadSanitizer in CI: the
// history below is plain memory, so TSan reports a race if the mirror's
// publication did not order it.

#include "sluice/runtime/policy/breaker/breaker_mirror.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice::policy;

TEST_CASE("a reader that sees open sees a generation that was open") {
  breaker_config cfg;
  cfg.window_size = 4;
  cfg.min_samples = 2;
  cfg.open_duration = 1s;
  breaker_policy machine{cfg};
  breaker_mirror mirror;
  constexpr uint64_t min_generations = 30000;
  constexpr uint64_t max_generations = 10 * min_generations;
  // history[g] = state entered at generation g; written before publishing.
  std::vector<breaker_state> history(max_generations + 8,
                                     breaker_state::closed);
  std::atomic<uint64_t> authoritative{machine.generation()};
  std::atomic<bool> done{false};
  std::atomic<int> readers_ready{0};
  std::atomic<uint64_t> opens_seen{0};
  std::atomic<uint64_t> violations{0};

  auto publish = [&](const std::optional<breaker_transition>& t) {
    if (!t)
      return;
    history[t->generation] = t->to;
    authoritative.store(t->generation, std::memory_order_release);
    mirror.publish(t->to, t->generation);
  };

  std::thread writer([&] {
    while (readers_ready < 3)
      std::this_thread::yield();
    auto now = sluice::time_point{} + 1h;
    // Run until the readers saw the breaker open at least once (bounded).
    while (machine.generation() < min_generations ||
           (opens_seen == 0 && machine.generation() < max_generations)) {
      switch (machine.state()) {
      case breaker_state::closed:
        publish(machine.record(machine.generation(), true, 1ms, now));
        break;
      case breaker_state::open:
        // Until some reader has seen an open state, linger a little (bounded)
        // so a loaded machine cannot make the test vacuous.
        for (int spin = 0; opens_seen == 0 && spin < 2000; ++spin)
          std::this_thread::sleep_for(std::chrono::microseconds(10));
        now = machine.open_until();
        publish(machine.on_open_elapsed(now));
        break;
      case breaker_state::half_open: // probes alternate between results
        publish(machine.record(machine.generation(),
                               machine.generation() % 4 == 0, 1ms, now));
        break;
      }
    }
    done = true;
  });

  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      ++readers_ready;
      uint64_t last = 0;
      while (!done) {
        auto s = mirror.load();
        if (s.generation < last)
          ++violations; // the mirror never goes back in time
        last = s.generation;
        if (s.state != breaker_state::open)
          continue;
        ++opens_seen;
        // Entering generation g as open happened before we saw it, and the
        // breaker is at g or later now.
        if (history[s.generation] != breaker_state::open ||
            authoritative.load(std::memory_order_acquire) < s.generation)
          ++violations;
      }
    });
  }
  writer.join();
  for (auto& t : readers)
    t.join();
  CHECK(violations == 0);
  CHECK(opens_seen > 0);
  CHECK(mirror.load().generation == machine.generation());
}
