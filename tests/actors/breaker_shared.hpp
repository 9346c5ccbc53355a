// The breaker actor's tests' shared part: a caller actor that records its
// verdicts, and the fixture with one breaker in virtual time.

#pragma once

#include "sluice/actors/breaker.hpp"

#include <chrono>
#include <memory>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using decision = breaker_verdict::decision;

namespace breaker_test_support {

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;

// What a test caller saw: its last verdict.
struct caller_report {
  std::optional<breaker_verdict> verdict;
};

// A call: on `ask` asks the breaker; on `(finish, kind, retry_after)` reports
// the outcome under the verdict it got.
inline caf::behavior caller_actor(caf::event_based_actor* self,
                                  caf::actor breaker,
                                  std::shared_ptr<caller_report> report) {
  return {
      [=](ask_atom) {
        self->request(breaker, caf::infinite, allow_atom_v)
            .then([=](const breaker_verdict& v) { report->verdict = v; },
                  [](caf::error&) {});
      },
      [=](finish_atom, outcome_kind kind, time_point retry_after) {
        call_outcome out;
        out.generation = report->verdict->generation;
        out.lease = report->verdict->lease;
        out.kind = kind;
        out.elapsed = 10ms;
        if (retry_after != time_point{})
          out.retry_after = retry_after;
        self->send(breaker, record_atom_v, out);
      },
  };
}

// A subscriber that keeps every event it receives.
inline caf::behavior
listener_actor(caf::event_based_actor* self, caf::actor breaker,
               std::shared_ptr<std::vector<breaker_event>> log) {
  self->request(breaker, caf::infinite, subscribe_atom_v)
      .then([](const breaker_status&) {}, [](caf::error&) {});
  return {
      [=](const breaker_event& ev) { log->push_back(ev); },
  };
}

struct caller {
  caf::actor actor;
  std::shared_ptr<caller_report> report;

  const breaker_verdict& verdict() const { return *report->verdict; }
};

struct fixture : virtual_time_fixture {
  policy::breaker_config cfg;
  breaker_handle breaker;
  std::shared_ptr<std::vector<breaker_event>> events =
      std::make_shared<std::vector<breaker_event>>();

  fixture() {
    cfg.window_size = 10;
    cfg.min_samples = 5;
    cfg.failure_rate_threshold = 0.5;
    cfg.open_duration = 30s;
    breaker = spawn_breaker(sys, "upstream-a", cfg);
    sys.spawn(listener_actor, breaker.actor, events);
    run();
  }

  caller spawn_caller() {
    auto r = std::make_shared<caller_report>();
    return {sys.spawn(caller_actor, breaker.actor, r), r};
  }

  caller ask() {
    auto c = spawn_caller();
    ask(c);
    return c;
  }

  void ask(const caller& c) {
    c.report->verdict.reset();
    caf::anon_send(c.actor, ask_atom::value);
    run();
  }

  // `retry_after` is the upstream's "not before"; none if left default.
  void finish(const caller& c, outcome_kind kind,
              time_point retry_after = time_point{}) {
    caf::anon_send(c.actor, finish_atom::value, kind, retry_after);
    run();
  }

  // Drives the breaker open with min_samples failures from closed calls.
  void open_it() {
    for (int i = 0; i < 5; ++i) {
      auto c = ask();
      REQUIRE(c.verdict().what == decision::go);
      finish(c, outcome_kind::transient);
    }
    REQUIRE(state() == breaker_state::open);
  }

  breaker_state state() { return breaker.mirror->load().state; }

  std::vector<std::pair<breaker_state, breaker_state>> transitions() const {
    std::vector<std::pair<breaker_state, breaker_state>> out;
    for (auto& ev : *events)
      out.emplace_back(ev.from, ev.to);
    return out;
  }
};

using S = breaker_state;

} // namespace breaker_test_support
