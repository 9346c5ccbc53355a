// Actors on Asio loops of our own (issue 14's spike): request/then,
// delayed_send and scoped_actor work unchanged; an actor woken from a loop's
// handler runs on that loop's thread; the system shuts down cleanly.

#include "loop_scheduler_shared.hpp"

using namespace loop_scheduler_test_support;

TEST_CASE_METHOD(loops_fixture, "the actor system runs on the loop scheduler "
                                "- request and delayed_send work unchanged") {
  REQUIRE(scheduler().loops() == 2);
  auto echo = sys->spawn(echo_thread);
  caf::scoped_actor self{*sys};
  size_t answered_on = 0;
  self->request(echo, 5s, ping_atom::value)
      .receive([&](size_t id) { answered_on = id; },
               [](caf::error&) { FAIL("no answer"); });
  CHECK(answered_on !=
        std::hash<std::thread::id>{}(std::this_thread::get_id()));
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
      (void)helper;
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
