// Actors on Asio loops of our own (issue 14's spike): request/then,
// delayed_send and scoped_actor work unchanged; an actor woken from a loop's
// handler runs on that loop's thread; the system shuts down cleanly.

#include "sluice/actors/loop_scheduler.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
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

TEST_CASE_METHOD(loops_fixture, "an actor woken from a loop's handler runs on "
                                "that loop's thread") {
  auto echo = sys->spawn(echo_thread);
  for (size_t i = 0; i < scheduler().loops(); ++i) {
    auto& loop = scheduler().loop(i);
    std::promise<std::pair<size_t, size_t>> ids;
    boost::asio::post(loop, [&] {
      auto here = std::hash<std::thread::id>{}(std::this_thread::get_id());
      CHECK(loop_scheduler::current_loop() == &loop);
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
    auto [here, there] = ids.get_future().get();
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
    caf::scoped_actor self{*f.sys};
    while (answers < 200)
      std::this_thread::yield();
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  } // the system's destructor stops the loops
  CHECK(answers == 200);
}
