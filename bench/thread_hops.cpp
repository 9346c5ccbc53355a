// The floor under sluice-node's per-request cost: what it costs on this
// machine to hand work from an Asio I/O thread to a CAF actor and back --
// the crossing every request makes (front -> governor -> front, and again
// governor -> HTTP client thread -> governor).
//
//   thread_hops [round_trips] (default 200000; small numbers smoke)
//
// A closed loop with 1 and with 16 round trips in flight: the I/O thread
// `anon_send`s to an actor, which `post`s back to the io_context. Prints
// round trips/s, CPU time per round trip (user + system, all threads) and
// context switches per round trip (getrusage). Two arrangements in one run:
// CAF's work-sharing scheduler with an Asio thread of its own (as
// sluice-node is today), and the actors on the Asio loop itself
// (`loop_scheduler`, issue 14).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <fmt/core.h>
#include <functional>
#include <sys/resource.h>

#include "sluice/actors/loops/loop_scheduler.hpp"

namespace {

namespace net = boost::asio;

using hop_atom = caf::atom_constant<caf::atom("hop")>;

struct usage {
  double cpu_s;
  long switches;
};

usage now_usage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](timeval t) { return t.tv_sec + t.tv_usec / 1e6; };
  return {secs(ru.ru_utime) + secs(ru.ru_stime), ru.ru_nvcsw + ru.ru_nivcsw};
}

} // namespace

// One row per number in flight, for one arrangement: `own_loop` runs the
// Asio side on the actors' own loop (`loop_scheduler`, one loop), else on a
// thread of its own beside CAF's work-sharing scheduler.
void run(long total, bool own_loop) {
  caf::actor_system_config cfg;
  if (own_loop)
    sluice::use_loop_scheduler(cfg, 1);
  else
    cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  net::io_context separate;
  auto guard = net::make_work_guard(separate);
  std::thread io;
  net::io_context* ioc = &separate;
  if (own_loop)
    ioc = &dynamic_cast<sluice::loop_scheduler&>(sys.scheduler()).loop(0);
  else
    io = std::thread{[&] { separate.run(); }};
  std::atomic<long> done{0};
  std::mutex mx;
  std::condition_variable cv;
  std::function<void()> go;
  // The actor side: one hop in, one hop back out.
  auto actor = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
    return {[&](hop_atom) { net::post(*ioc, go); }};
  });
  go = [&] {
    auto n = done.fetch_add(1) + 1;
    if (n == total) {
      std::lock_guard<std::mutex> lock{mx};
      cv.notify_all();
    }
    if (n < total)
      caf::anon_send(actor, hop_atom::value);
  };
  fmt::print("{}\n", own_loop ? "actors on the Asio loop (loop_scheduler)"
                              : "CAF work-sharing + an Asio thread of its own");
  for (long in_flight : {1L, 16L}) {
    done = 0;
    auto u0 = now_usage();
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < in_flight; ++i)
      net::post(*ioc, [&] { caf::anon_send(actor, hop_atom::value); });
    {
      std::unique_lock<std::mutex> lock{mx};
      cv.wait(lock, [&] { return done.load() >= total; });
    }
    std::chrono::duration<double> wall = std::chrono::steady_clock::now() - t0;
    auto u1 = now_usage();
    // Let the last trips in flight drain before the next row.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fmt::print("{:>10} {:>14.0f} {:>16.2f} {:>20.2f}\n", in_flight,
               total / wall.count(), (u1.cpu_s - u0.cpu_s) * 1e6 / total,
               static_cast<double>(u1.switches - u0.switches) / total);
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  guard.reset();
  separate.stop();
  if (io.joinable())
    io.join();
}

int main(int argc, char** argv) {
  long total = argc > 1 ? std::atol(argv[1]) : 200'000;
  fmt::print("Asio handler -> CAF actor -> Asio handler, {} round trips per "
             "row\n{:>10} {:>14} {:>16} {:>20}\n",
             total, "in flight", "round trips/s", "CPU us/round trip",
             "switches/round trip");
  run(total, false);
  run(total, true);
  return 0;
}
