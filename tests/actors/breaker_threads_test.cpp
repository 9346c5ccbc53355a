// The breaker actor on CAF's real scheduler, driven through many
// transitions while plain threads read its mirror. Checks, after the fact,
// that every `open` a reader saw was a real open state of the actor (a
// transition to open at that generation, as broadcast to a subscriber) and
// that no reader ever saw the mirror go back in time.
// (Actors cannot run under TSan with Debian's CAF; the mirror's memory
// ordering is checked under TSan in breaker_mirror_test.cpp.)

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/breaker.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;

namespace {

struct event_log {
  std::mutex mx;
  std::vector<breaker_event> events;
};

caf::behavior recorder(caf::event_based_actor* self, caf::actor breaker,
                       std::shared_ptr<event_log> log) {
  self->request(breaker, caf::infinite, subscribe_atom_v)
      .then([](const breaker_status&) {}, [](caf::error&) {});
  return {
      [=](const breaker_event& ev) {
        std::lock_guard<std::mutex> guard{log->mx};
        log->events.push_back(ev);
      },
      [](status_atom) { return true; }, // answered after earlier events
  };
}

} // namespace

TEST_CASE("mirror readers on other threads only ever see real open states") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  policy::breaker_config bc;
  bc.min_samples = 1;
  bc.failure_rate_threshold = 1.0;
  bc.open_duration = 200us;
  auto breaker = spawn_breaker(sys, "flaky", bc);
  auto log = std::make_shared<event_log>();
  auto rec = sys.spawn(recorder, breaker.actor, log);
  caf::scoped_actor self{sys};
  // Start driving only once the recorder is subscribed.
  for (uint32_t subs = 0; subs == 0;) {
    self->request(breaker.actor, 5s, status_atom_v)
        .receive([&](const breaker_status& st) { subs = st.subscribers; },
                 [](caf::error&) {});
    if (subs == 0)
      std::this_thread::sleep_for(1ms);
  }

  std::atomic<bool> done{false};
  std::vector<std::vector<uint64_t>> seen_open(3);
  std::atomic<int> backwards{0};
  std::vector<std::thread> readers;
  for (size_t r = 0; r < seen_open.size(); ++r) {
    readers.emplace_back([&, r] {
      uint64_t last = 0;
      while (!done) {
        auto s = breaker.mirror->load();
        if (s.generation < last)
          ++backwards;
        if (s.state == breaker_state::open && s.generation != last)
          seen_open[r].push_back(s.generation);
        last = s.generation;
      }
    });
  }

  // Drive the breaker: a failure opens it, the timer half-opens it, probes
  // alternately fail and succeed.
  bool fail_probe = true;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (breaker.mirror->load().generation < 400 &&
         std::chrono::steady_clock::now() < deadline) {
    std::optional<breaker_verdict> v;
    self->request(breaker.actor, 5s, allow_atom_v)
        .receive([&](const breaker_verdict& x) { v = x; }, [&](caf::error&) {});
    REQUIRE(v);
    if (!v->may_go()) {
      std::this_thread::sleep_for(50us);
      continue;
    }
    call_outcome out;
    out.generation = v->generation;
    out.lease = v->lease;
    bool fails = v->what == breaker_verdict::decision::go || fail_probe;
    if (v->what == breaker_verdict::decision::probe)
      fail_probe = !fail_probe;
    out.kind = fails ? outcome_kind::transient : outcome_kind::ok;
    self->send(breaker.actor, record_atom_v, out);
  }
  // Every event is in the recorder's mailbox before the breaker answers this
  // status request, and processed before the recorder answers the next.
  self->request(breaker.actor, 5s, status_atom_v)
      .receive([](const breaker_status&) {}, [](caf::error&) {});
  self->request(rec, 5s, status_atom_v)
      .receive([](bool) {}, [](caf::error&) {});
  done = true;
  for (auto& t : readers)
    t.join();

  std::set<uint64_t> open_generations;
  {
    std::lock_guard<std::mutex> guard{log->mx};
    for (auto& ev : log->events)
      if (ev.to == breaker_state::open)
        open_generations.insert(ev.generation);
  }
  CHECK(open_generations.size() > 50);
  size_t checked = 0;
  for (auto& reader : seen_open) {
    for (auto g : reader) {
      ++checked;
      INFO("generation " << g);
      CHECK(open_generations.count(g) == 1);
    }
  }
  CHECK(checked > 0);
  CHECK(backwards == 0);
}
