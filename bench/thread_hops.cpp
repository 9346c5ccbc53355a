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
// context switches per round trip (getrusage). Uses CAF's work-sharing
// scheduler, as sluice-node does by default.

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
#include <sys/resource.h>

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

int main(int argc, char** argv) {
  long total = argc > 1 ? std::atol(argv[1]) : 200'000;
  caf::actor_system_config cfg;
  cfg.set("scheduler.policy", caf::atom("sharing"));
  caf::actor_system sys{cfg};
  net::io_context ioc;
  auto guard = net::make_work_guard(ioc);
  std::thread io{[&] { ioc.run(); }};
  std::atomic<long> done{0};
  std::mutex mx;
  std::condition_variable cv;
  std::function<void()> go;
  // The actor side: one hop in, one hop back out.
  auto actor = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
    return {[&](hop_atom) { net::post(ioc, go); }};
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
  fmt::print("Asio thread -> CAF actor -> Asio thread, {} round trips per "
             "row\n{:>10} {:>14} {:>16} {:>20}\n",
             total, "in flight", "round trips/s", "CPU us/round trip",
             "switches/round trip");
  for (long in_flight : {1L, 16L}) {
    done = 0;
    auto u0 = now_usage();
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < in_flight; ++i)
      net::post(ioc, [&] { caf::anon_send(actor, hop_atom::value); });
    {
      std::unique_lock<std::mutex> lock{mx};
      cv.wait(lock, [&] { return done.load() >= total; });
    }
    std::chrono::duration<double> wall = std::chrono::steady_clock::now() - t0;
    auto u1 = now_usage();
    // Let the last trips in flight drain before the next row.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fmt::print("{:>10} {:>14.0f} {:>16.1f} {:>20.2f}\n", in_flight,
               total / wall.count(), (u1.cpu_s - u0.cpu_s) * 1e6 / total,
               static_cast<double>(u1.switches - u0.switches) / total);
  }
  guard.reset();
  ioc.stop();
  io.join();
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return 0;
}
