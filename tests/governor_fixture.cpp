#include "governor_fixture.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/scope_backend.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/sources.hpp"

namespace sluice::testing {

namespace {

caf::behavior client(caf::event_based_actor* self, caf::actor governor,
                     std::shared_ptr<call_report> report) {
  self->monitor(governor);
  self->set_down_handler([=](caf::down_msg&) {
    if (!report->result)
      report->cancelled = true;
    self->quit();
  });
  self->request(governor, caf::infinite, call_atom_v)
      .then(
          [=](call_result& r) {
            report->result = std::move(r);
            report->done_at = self->clock().now();
          },
          [](caf::error&) {});
  return {
      [=](stream_chunk_atom, std::string& bytes) {
        report->chunks.emplace_back(self->clock().now(), std::move(bytes));
      },
  };
}

} // namespace

policy::breaker_config lenient_breaker() {
  policy::breaker_config b;
  b.window_size = 1000;
  b.min_samples = 1000;
  return b;
}

governor_fixture::governor_fixture() {
  global = spawn_global_tier(sys, 1024);
  backend = spawn_local_scope_backend(sys);
}

void governor_fixture::make_route(std::vector<test_source> sources,
                                  policy::call_policy policy) {
  route = std::make_shared<route_plan>();
  route->name = "test";
  route->scope = "test";
  route->policy = policy;
  route->backend = backend;
  sims.clear();
  for (auto& s : sources) {
    sims.push_back(spawn_simulated_source(sys, s.sim));
    route->sources.push_back(make_source(sys, s.name, sims.back().actor,
                                         s.breaker, s.aimd, s.quota,
                                         /* self_timed */ true));
  }
  run();
}

admission_path governor_fixture::fresh_path() {
  return {spawn_session_tier(sys, 16), spawn_connection_tier(sys, 256), global};
}

void governor_fixture::record_failure(size_t i) {
  call_outcome fail;
  fail.generation = source(i).breaker.mirror->load().generation;
  fail.kind = policy::outcome_kind::transient;
  caf::anon_send(source(i).breaker.actor, record_atom_v, fail);
  run();
}

governed_call governor_fixture::call(uint64_t seed) {
  return call(fresh_path(), seed);
}

governed_call governor_fixture::call(admission_path path, uint64_t seed) {
  governor_config cfg;
  cfg.request.route = "test";
  cfg.request.payload = R"({"messages":[]})";
  cfg.request.stream = stream_calls;
  cfg.admission = std::move(path);
  cfg.wait_timeout = wait_timeout;
  cfg.route = route;
  cfg.seed = seed;
  auto gov = spawn_governor(sys, std::move(cfg));
  auto report = std::make_shared<call_report>();
  auto cl = sys.spawn(client, gov, report);
  run();
  return {gov, cl, report};
}

void governor_fixture::run_until_done(const governed_call& c, duration limit) {
  auto end = now() + limit;
  while (!c.done() && !c.report->cancelled && now() < end) {
    const auto& pending = sched.clock().schedule();
    if (pending.empty())
      break;
    auto next = std::min(pending.begin()->first, end);
    advance_to(next);
  }
}

} // namespace sluice::testing
