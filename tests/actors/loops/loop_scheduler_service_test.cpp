// The loop scheduler on a service's own io_contexts (use_service_loops):
// threads released at the stop, its limits, queued jobs and slow handlers.

#include "loop_scheduler_shared.hpp"

using namespace loop_scheduler_test_support;

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
