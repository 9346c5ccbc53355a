// Actors on Asio loops of our own (issue 14's spike): request/then,
// delayed_send and scoped_actor work unchanged; an actor woken from a loop's
// handler runs on that loop's thread; the system shuts down cleanly.

#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/actors/loops/loop_guard.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;

struct loops_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  explicit loops_fixture(size_t loops = 2) {
    use_loop_scheduler(cfg, loops);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  loop_scheduler& scheduler() {
    return dynamic_cast<loop_scheduler&>(sys->scheduler());
  }
};

// Answers each ping with the id of the thread it ran on.
caf::behavior echo_thread(caf::event_based_actor*) {
  return {
      [](ping_atom) {
        return std::hash<std::thread::id>{}(std::this_thread::get_id());
      },
  };
}

} // namespace

TEST_CASE_METHOD(loops_fixture, "the actor system runs on the loop scheduler "
                                "- request and delayed_send work unchanged") {
  REQUIRE(scheduler().loops() == 2);
  auto echo = sys->spawn(echo_thread);
  caf::scoped_actor self{*sys};
  size_t answered_on = 0;
  self->request(echo, 5s, ping_atom::value)
      .receive([&](size_t id) { answered_on = id; },
               [](caf::error&) { FAIL("no answer"); });
  CHECK(answered_on != std::hash<std::thread::id>{}(std::this_thread::get_id()));
  // A timer of CAF's clock reaches an actor on a loop.
  auto start = std::chrono::steady_clock::now();
  self->delayed_send(self, 20ms, ping_atom::value);
  self->receive([](ping_atom) {});
  CHECK(std::chrono::steady_clock::now() - start >= 20ms);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_CASE("an actor woken from a loop's handler runs on that loop's thread") {
  loops_fixture f{4};
  auto& sys = f.sys;
  auto scheduler = [&f]() -> loop_scheduler& { return f.scheduler(); };
  auto echo = sys->spawn(echo_thread);
  // Each loop many times: a scheduler that ignored the loop would put some
  // of them on another thread.
  for (size_t i = 0; i < 40 * scheduler().loops(); ++i) {
    auto& loop = scheduler().loop(i % scheduler().loops());
    std::promise<std::pair<size_t, size_t>> ids;
    boost::asio::post(loop, [&] {
      auto here = std::hash<std::thread::id>{}(std::this_thread::get_id());
      CHECK(loop_scheduler::current_loop() == &loop);
      CHECK(scheduler().current_index() == i % scheduler().loops());
      // From a loop thread: the request, the echo and the answer all stay
      // on this loop.
      auto helper = sys->spawn([&ids, here, echo](caf::event_based_actor* me) {
        me->request(echo, 5s, ping_atom::value)
            .then([&ids, here, me](size_t there) {
              ids.set_value({here, there});
              me->quit();
            });
      });
      (void) helper;
    });
    auto done = ids.get_future();
    REQUIRE(done.wait_for(10s) == std::future_status::ready);
    auto [here, there] = done.get();
    CHECK(here == there);
  }
  CHECK(loop_scheduler::current_loop() == nullptr);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_CASE("a system on loops with many actors in flight shuts down cleanly") {
  std::atomic<int> answers{0};
  {
    loops_fixture f{3};
    auto echo = f.sys->spawn(echo_thread);
    for (int i = 0; i < 200; ++i)
      f.sys->spawn([&answers, echo](caf::event_based_actor* me) {
        me->request(echo, 5s, ping_atom::value).then([&answers](size_t) {
          ++answers;
        });
      });
    auto until = std::chrono::steady_clock::now() + 10s;
    while (answers < 200 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    REQUIRE(answers == 200);
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  } // the system's destructor stops the loops
}

namespace {

// Sends itself a message forever: always queued on its loop.
caf::behavior spinner(caf::event_based_actor* self, std::atomic<int>* turns) {
  self->send(self, ping_atom::value);
  return {
      [self, turns](ping_atom) {
        ++*turns;
        self->send(self, ping_atom::value);
      },
  };
}

} // namespace

TEST_CASE("the loops stop with jobs queued and actors still sending") {
  std::atomic<int> turns{0};
  {
    loops_fixture f{2};
    f.sys->await_actors_before_shutdown(false);
    for (int i = 0; i < 50; ++i)
      f.sys->spawn(spinner, &turns);
    auto until = std::chrono::steady_clock::now() + 10s;
    while (turns < 10000 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    REQUIRE(turns >= 10000);
  } // stopped with 50 jobs queued at any moment: each released once (ASan,
    // LSan: no use after free, no leak)
}

TEST_CASE("one busy actor does not hold its loop") {
  // CAF's default throughput is unbounded; the loops cap a turn.
  loops_fixture f{1};
  f.sys->await_actors_before_shutdown(false);
  std::atomic<int> turns{0};
  auto spin = f.sys->spawn(spinner, &turns);
  // The loop still runs a handler of its own while the spinner is busy.
  std::promise<void> ran;
  boost::asio::post(f.scheduler().loop(0), [&ran] { ran.set_value(); });
  CHECK(ran.get_future().wait_for(10s) == std::future_status::ready);
  caf::anon_send_exit(spin, caf::exit_reason::user_shutdown);
}

namespace {

using hop_atom = caf::atom_constant<caf::atom("hop")>;

// Counts a hop and passes the message on to `next`, `left` more times.
caf::behavior hopper(caf::event_based_actor* self, std::atomic<int>* hops) {
  return {
      [=](hop_atom, int left, const caf::actor& next) {
        ++*hops;
        if (left > 0)
          self->send(next, hop_atom::value, left - 1,
                     caf::actor_cast<caf::actor>(self));
      },
  };
}

} // namespace

TEST_CASE("a chain of messages between actors on a loop runs in one round "
          "of it, up to the drain's bound") {
  loops_fixture f{1};
  auto& loop = f.scheduler().loop(0);
  std::atomic<int> hops{0};
  auto a = f.sys->spawn(hopper, &hops);
  auto b = f.sys->spawn(hopper, &hops);
  // A handler of the loop starts a chain of `length` messages, a -> b ->
  // a ..., and posts a handler of its own behind the chain's first drain:
  // how many hops ran before that handler did.
  auto hops_before_next_handler = [&](int length) {
    hops = 0;
    std::promise<int> seen;
    boost::asio::post(loop, [&] {
      caf::anon_send(a, hop_atom::value, length - 1, b);
      boost::asio::post(loop, [&] { seen.set_value(hops.load()); });
    });
    auto result = seen.get_future();
    REQUIRE(result.wait_for(10s) == std::future_status::ready);
    return result.get();
  };
  hops_before_next_handler(2); // both actors started
  CHECK(hops_before_next_handler(5) == 5);
  // A longer chain yields to the loop's handlers after its bound.
  CHECK(hops_before_next_handler(20) == loop_scheduler::drain_passes);
  auto until = std::chrono::steady_clock::now() + 10s;
  while (hops < 20 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  CHECK(hops == 20); // and goes on in the next drain
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_CASE("the actors a handler's turn wakes on its loop run as the turn "
          "ends, not a round of the loop later") {
  loops_fixture f{1};
  auto& loop = f.scheduler().loop(0);
  std::atomic<int> hops{0};
  auto a = f.sys->spawn(hopper, &hops);
  auto b = f.sys->spawn(hopper, &hops);
  auto run_on_loop = [&](auto fn) {
    std::promise<void> done;
    boost::asio::post(loop, [&] {
      fn();
      done.set_value();
    });
    REQUIRE(done.get_future().wait_for(10s) == std::future_status::ready);
  };
  run_on_loop([&] { caf::anon_send(a, hop_atom::value, 1, b); });
  auto until = std::chrono::steady_clock::now() + 10s;
  while (hops < 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  REQUIRE(hops == 2); // both actors started
  int inside = -1;
  int after_turn = -1;
  int after_nested = -1;
  run_on_loop([&] {
    hops = 0;
    {
      loop_turn turn;
      {
        loop_turn nested; // the outermost turn's end runs them
        caf::anon_send(a, hop_atom::value, 2, b);
      }
      after_nested = hops.load();
      inside = hops.load();
    }
    after_turn = hops.load();
  });
  CHECK(inside == 0);
  CHECK(after_nested == 0);
  CHECK(after_turn == 3); // a -> b -> a, all in the turn's drain
  // Without a turn the same chain waits for a drain posted behind the
  // handler.
  int without_turn = -1;
  run_on_loop([&] {
    hops = 0;
    caf::anon_send(a, hop_atom::value, 2, b);
    without_turn = hops.load();
  });
  CHECK(without_turn == 0);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_CASE("a busy actor that used its share waits behind the loop's "
          "handlers, not for the drain's next pass") {
  loops_fixture f{1};
  f.sys->await_actors_before_shutdown(false);
  auto& loop = f.scheduler().loop(0);
  std::atomic<int> turns{0};
  auto spin = f.sys->spawn(spinner, &turns);
  // Between two handlers posted one after the other, at most one drain
  // runs, and in it the spinner at most one share of messages.
  for (int i = 0; i < 5; ++i) {
    std::promise<int> gap;
    boost::asio::post(loop, [&] {
      int before = turns.load();
      boost::asio::post(loop, [&, before] { gap.set_value(turns - before); });
    });
    auto result = gap.get_future();
    REQUIRE(result.wait_for(10s) == std::future_status::ready);
    CHECK(result.get() <= static_cast<int>(default_loop_throughput));
  }
  caf::anon_send_exit(spin, caf::exit_reason::user_shutdown);
}

TEST_CASE("an actor that set no timeout ends without waking the clock, one "
          "that did has its timeout cancelled") {
  loops_fixture f{2};
  auto& clock = f.scheduler().timers();
  auto skipped_before = clock.skipped_cancellations();
  auto forwarded_before = clock.forwarded_cancellations();
  // 500 actors that never set a timeout: their ends cost the clock nothing.
  std::atomic<int> ended{0};
  for (int i = 0; i < 500; ++i)
    f.sys->spawn([&ended](caf::event_based_actor* me) {
      me->attach_functor([&ended] { ++ended; });
      me->quit();
    });
  auto until = std::chrono::steady_clock::now() + 10s;
  while (ended < 500 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  REQUIRE(ended == 500);
  until = std::chrono::steady_clock::now() + 10s;
  while (clock.skipped_cancellations() - skipped_before < 500 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  CHECK(clock.skipped_cancellations() - skipped_before >= 500);
  CHECK(clock.forwarded_cancellations() == forwarded_before);
  // An actor with a receive timeout of an hour, which quits at once: its
  // timeout is cancelled. The clock's entry holds a strong reference, so
  // without the cancellation the actor would stay for the hour.
  auto timed = f.sys->spawn([](caf::event_based_actor* me) -> caf::behavior {
    return {
        [me](ping_atom) { me->quit(); },
        caf::after(std::chrono::seconds{3600}) >> [] {},
    };
  });
  // It set its timeout when it started.
  until = std::chrono::steady_clock::now() + 10s;
  while (clock.timed_actors() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  REQUIRE(clock.timed_actors() >= 1);
  auto weak = caf::actor_cast<caf::actor_addr>(timed);
  caf::anon_send(timed, ping_atom::value);
  timed = nullptr;
  until = std::chrono::steady_clock::now() + 10s;
  while (caf::actor_cast<caf::actor>(weak) != nullptr &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  CHECK(caf::actor_cast<caf::actor>(weak) == nullptr); // nothing holds it
  CHECK(clock.forwarded_cancellations() - forwarded_before >= 1);
}

// -- a service's own io_contexts ----------------------------------------------

namespace {

// Two io_contexts a service runs, one thread each.
struct service_loops {
  boost::asio::io_context a, b;
  using guard_t =
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::optional<guard_t> hold_a{a.get_executor()}, hold_b{b.get_executor()};
  std::thread ta{[this] { a.run(); }}, tb{[this] { b.run(); }};

  ~service_loops() { stop(); }

  void stop() {
    hold_a.reset();
    hold_b.reset();
    if (ta.joinable())
      ta.join();
    if (tb.joinable())
      tb.join();
  }

  // Runs `fn` on `loop` and waits for its result.
  template <class F>
  auto on(boost::asio::io_context& loop, F fn) {
    std::promise<decltype(fn())> out;
    auto got = out.get_future();
    boost::asio::post(loop, [&] { out.set_value(fn()); });
    REQUIRE(got.wait_for(10s) == std::future_status::ready);
    return got.get();
  }
};

size_t this_thread_hash() {
  return std::hash<std::thread::id>{}(std::this_thread::get_id());
}

} // namespace

TEST_CASE("actors run on a service's own io_contexts, and the service's "
          "threads are released at the system's stop") {
  service_loops svc;
  auto thread_a = svc.on(svc.a, this_thread_hash);
  auto thread_b = svc.on(svc.b, this_thread_hash);
  {
    caf::actor_system_config cfg;
    use_service_loops(cfg, {&svc.a, &svc.b});
    caf::actor_system sys{cfg};
    auto& s = *loop_scheduler::of(sys);
    REQUIRE(s.loops() == 2);
    CHECK(&s.loop(0) == &svc.a);
    CHECK(&s.loop(1) == &svc.b);
    auto echo = sys.spawn(echo_thread);
    // From a service handler on each loop: the actor it wakes, and the
    // answer, run on that loop's thread -- the service's own.
    for (int i = 0; i < 20; ++i) {
      auto& loop = i % 2 == 0 ? svc.a : svc.b;
      auto want = i % 2 == 0 ? thread_a : thread_b;
      std::promise<std::pair<size_t, size_t>> ids;
      boost::asio::post(loop, [&] {
        CHECK(loop_scheduler::current_loop() == &loop);
        CHECK(s.current_index() == static_cast<size_t>(i % 2));
        sys.spawn([&ids, echo](caf::event_based_actor* me) {
          auto here = this_thread_hash();
          me->request(echo, 5s, ping_atom::value)
              .then([&ids, here, me](size_t there) {
                ids.set_value({here, there});
                me->quit();
              });
        });
      });
      auto got = ids.get_future();
      REQUIRE(got.wait_for(10s) == std::future_status::ready);
      auto [here, there] = got.get();
      CHECK(here == want);
      CHECK(there == want);
    }
    // The service's own handlers still run between the actors'.
    CHECK(svc.on(svc.b, [] { return 7; }) == 7);
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  } // the system stops here, from a thread that runs neither loop
  // The loops run on for the service, no longer as the system's loops.
  CHECK(svc.on(svc.a, [] { return on_loop_thread(); }) == false);
  CHECK(svc.on(svc.b, [] { return on_loop_thread(); }) == false);
  svc.stop(); // returns: the scheduler no longer holds work on them
}

TEST_CASE("a service's loop not run during the system's stop: the stop "
          "waits its limit, then releases that loop's jobs unrun") {
  boost::asio::io_context idle; // nobody runs it
  std::atomic<int> ran{0};
  auto start = std::chrono::steady_clock::now();
  {
    caf::actor_system_config cfg;
    use_service_loops(cfg, {&idle}, 200ms);
    caf::actor_system sys{cfg};
    sys.await_actors_before_shutdown(false);
    // A message queued for an actor on the loop nobody runs.
    auto a = sys.spawn([&ran](caf::event_based_actor*) -> caf::behavior {
      return {[&ran](ping_atom) { ++ran; }};
    });
    caf::anon_send(a, ping_atom::value);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);
  CHECK(ran == 0);
  // The service runs it at last: the scheduler's handlers left on it find
  // nothing to do and touch nothing freed (ASan), and leave no note.
  idle.restart();
  idle.poll();
  CHECK(ran == 0);
  CHECK_FALSE(on_loop_thread());
}

TEST_CASE("use_service_loops refuses no io_context, a null, a repeated one "
          "or one made for one thread") {
  caf::actor_system_config cfg;
  boost::asio::io_context a;
  boost::asio::io_context one_thread{1};
  CHECK_THROWS_WITH(use_service_loops(cfg, {}),
                    Catch::Contains("no io_context"));
  CHECK_THROWS_WITH(use_service_loops(cfg, {&a, nullptr}),
                    Catch::Contains("io_context 1 is null"));
  CHECK_THROWS_WITH(use_service_loops(cfg, {&a, &a}),
                    Catch::Contains("io_context 1 is given twice"));
  CHECK_THROWS_WITH(use_service_loops(cfg, {&a, &one_thread}),
                    Catch::Contains("io_context 1 was made with concurrency "
                                    "hint 1"));
  CHECK_THROWS_WITH(use_service_loops(cfg, {&a}, -1ms),
                    Catch::Contains("negative"));
  CHECK(cfg.module_factories.empty());
}

namespace {

// Counts the ends of its actors' states.
struct counted_state {
  std::atomic<int>* ended = nullptr;
  ~counted_state() {
    if (ended != nullptr)
      ++*ended;
  }
};

caf::behavior counted(caf::stateful_actor<counted_state>* self,
                      std::atomic<int>* ended, std::atomic<bool>* busy,
                      std::chrono::milliseconds work) {
  self->state.ended = ended;
  return {[=](ping_atom) {
    *busy = true;
    std::this_thread::sleep_for(work); // a slow handler
  }};
}

} // namespace

TEST_CASE("the stop runs a service loop's queued jobs, then lets the loop "
          "go: a service holding no work of its own sees run() return") {
  boost::asio::io_context loop;
  std::atomic<int> ended{0};
  std::atomic<bool> busy{false};
  std::thread runner;
  auto start = std::chrono::steady_clock::now();
  {
    caf::actor_system_config cfg;
    use_service_loops(cfg, {&loop}, 5s);
    caf::actor_system sys{cfg};
    sys.await_actors_before_shutdown(false);
    // The service runs the loop without a work guard: the scheduler's
    // work keeps it running.
    runner = std::thread{[&loop] { loop.run(); }};
    // The loop is busy with a handler of the service's when the stop
    // begins, with the actor's exit still queued behind it.
    boost::asio::post(loop, [] { std::this_thread::sleep_for(300ms); });
    auto a = sys.spawn(counted, &ended, &busy, 0ms);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  // The stop waited for the loop to run the exit (the state ended), not
  // its 5 s limit; then run() returned (nothing else holds the loop).
  CHECK(ended == 1);
  CHECK(std::chrono::steady_clock::now() - start < 4s);
  runner.join();
  CHECK(loop.stopped());
}

TEST_CASE("a service loop still running an actor's slow handler when the "
          "stop's wait ends: the stop waits for it, the system outlives it") {
  boost::asio::io_context loop;
  auto hold = boost::asio::make_work_guard(loop);
  std::thread runner{[&loop] { loop.run(); }};
  std::atomic<int> ended{0};
  std::atomic<bool> busy{false};
  auto start = std::chrono::steady_clock::now();
  {
    caf::actor_system_config cfg;
    use_service_loops(cfg, {&loop}, 100ms);
    caf::actor_system sys{cfg};
    sys.await_actors_before_shutdown(false);
    auto a = sys.spawn(counted, &ended, &busy, 600ms);
    caf::anon_send(a, ping_atom::value);
    while (!busy)
      std::this_thread::yield();
  } // a resume touching a freed system after this: ASan
  CHECK(std::chrono::steady_clock::now() - start >= 500ms);
  // The loop runs on for the service.
  std::promise<bool> on_loop;
  boost::asio::post(loop, [&] { on_loop.set_value(on_loop_thread()); });
  CHECK(on_loop.get_future().get() == false);
  hold.reset();
  runner.join();
}
