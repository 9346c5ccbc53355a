// The embedding facade: config errors that name the key, calls through
// callbacks, cancellation, sessions, weighted routes (virtual time).

#include "sluice/runtime/runtime.hpp"

#include <chrono>
#include <map>

#include <caf/actor_registry.hpp>
#include <caf/scoped_actor.hpp>
#include <catch2/catch.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/config_error.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;

namespace {

std::string refused_key(std::function<void()> f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.key();
  }
  return "";
}

sim_config answering(duration latency) {
  sim_config s;
  s.phases[0].latency_min = s.phases[0].latency_max = latency;
  return s;
}

struct fixture : virtual_time_fixture {
  runtime rt{sys, runtime_config{}};

  // Starts a call; the returned result fills in when it ends.
  std::shared_ptr<std::optional<call_result>>
  start(const std::string& route, call_options opts = {},
        call_handle* handle = nullptr) {
    auto out = std::make_shared<std::optional<call_result>>();
    auto h = rt.call(
        call_request{route, "{}"},
        [out](call_result r) { *out = std::move(r); }, opts);
    if (handle)
      *handle = h;
    run();
    return out;
  }
};

} // namespace

TEST_CASE_METHOD(virtual_time_fixture,
                 "a refused runtime config leaves no actor running") {
  // A bad kind with Redis and a cluster cap configured: it used to throw
  // after the Redis backend, the cluster tier and the relay were spawned,
  // which then ran (and kept the actor system from shutting down).
  run();
  auto before = sys.registry().running();
  runtime_config bad;
  bad.redis = redis_config{};
  bad.cluster_global_cap = 4;
  bad.kinds["chat"].max_attempts = 0;
  CHECK(refused_key([&] { runtime{sys, bad}; }) == "kinds.chat.max_attempts");
  runtime_config bad_ttl;
  bad_ttl.redis = redis_config{};
  bad_ttl.cluster_global_cap = 4;
  bad_ttl.lease_ttl = std::chrono::milliseconds{5};
  CHECK(refused_key([&] { runtime{sys, bad_ttl}; }) == "backend.lease_ttl");
  // The backend's rules hold without Redis too (as in a config file).
  runtime_config short_ttl;
  short_ttl.progress_ttl = std::chrono::milliseconds{500};
  CHECK(refused_key([&] { runtime{sys, short_ttl}; }) ==
        "backend.progress_ttl");
  runtime_config cap_alone;
  cap_alone.cluster_global_cap = 2;
  CHECK(refused_key([&] { runtime{sys, cap_alone}; }) ==
        "backend.cluster_global_cap");
  run();
  CHECK(sys.registry().running() == before);
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "runtime config errors name the offending key") {
  runtime_config bad;
  bad.kinds["chat"].max_attempts = 0;
  CHECK(refused_key([&] { runtime{sys, bad}; }) == "kinds.chat.max_attempts");
  runtime_config bad_admission;
  bad_admission.admission.global_cap = 0;
  CHECK(refused_key([&] {
          runtime{sys, bad_admission};
        }) == "admission.global_cap");

  runtime rt{sys, runtime_config{}};
  source_settings s;
  s.breaker.failure_rate_threshold = 3;
  CHECK(refused_key([&] { rt.add_simulated_source("a", {}, s); }) ==
        "sources.a.breaker.failure_rate_threshold");
  sim_config broken;
  broken.phases[0].hang_rate = 2;
  CHECK(refused_key([&] { rt.add_simulated_source("a", broken); }) ==
        "sources.a.simulated.phases[0].hang_rate");
  rt.add_simulated_source("a", {});
  CHECK(refused_key([&] { rt.add_simulated_source("a", {}); }) == "sources.a");
  CHECK(refused_key([&] {
          rt.add_route({"r", "chat", {"nope"}, {}, {}});
        }) == "routes.r.sources");
  CHECK(refused_key([&] {
          rt.add_route({"r", "poetry", {"a"}, {}, {}});
        }) == "routes.r.kind");
  CHECK(refused_key([&] {
          rt.add_route({"r", "chat", {"a"}, {1, 2}, {}});
        }) == "routes.r.weights");
  CHECK(refused_key([&] {
          rt.add_route({"r", "chat", {}, {}, {}});
        }) == "routes.r.sources");
  CHECK_THROWS_AS(rt.call(call_request{"unknown", ""}, [](call_result) {}),
                  std::invalid_argument);
}

TEST_CASE_METHOD(fixture, "a call through the facade delivers one result") {
  rt.add_simulated_source("a", answering(2s));
  rt.add_route({"chat", "chat", {"a"}, {}, {}});
  auto r = start("chat");
  CHECK_FALSE(*r);
  advance(2s);
  REQUIRE(*r);
  CHECK((*r)->ok());
  CHECK((*r)->source == "a");
  CHECK(rt.tiers().global().status().in_use == 0);
}

TEST_CASE_METHOD(fixture,
                 "cancelling a call reports cancelled and returns every "
                 "permit") {
  auto sim = rt.add_simulated_source("a", answering(60s));
  rt.add_route({"chat", "chat", {"a"}, {}, {}});
  call_handle h;
  auto r = start("chat", {}, &h);
  advance(1s);
  REQUIRE(sim.stats->in_flight == 1);
  h.cancel();
  run();
  REQUIRE(*r);
  CHECK((*r)->status == call_status::cancelled);
  CHECK(rt.tiers().global().status().in_use == 0);
  CHECK(rt.session("default").status().in_use == 0);
  CHECK(rt.source("a").tier->load().in_use == 0);
  CHECK(sim.stats->in_flight == 0);
  CHECK(sim.stats->cancelled == 1);
}

TEST_CASE_METHOD(virtual_time_fixture,
                 "calls in one session share its tier - other sessions do "
                 "not wait") {
  runtime_config cfg;
  cfg.admission.session_cap = 1;
  runtime rt{sys, cfg};
  rt.add_simulated_source("a", answering(10s));
  rt.add_route({"chat", "chat", {"a"}, {}, {}});
  std::vector<std::optional<call_result>> results(3);
  auto call_in = [&](size_t i, std::string session) {
    call_options o;
    o.session = std::move(session);
    rt.call(
        call_request{"chat", "{}"},
        [&results, i](call_result r) { results[i] = std::move(r); }, o);
  };
  call_in(0, "alice");
  call_in(1, "alice"); // waits for alice's only permit, then tool_busy
  call_in(2, "bob");
  run();
  advance(3s);
  REQUIRE(results[1]);
  CHECK(results[1]->status == call_status::tool_busy);
  CHECK(results[1]->busy_tier == tier_kind::session);
  advance(7s);
  REQUIRE(results[0]);
  REQUIRE(results[2]);
  CHECK(results[0]->ok());
  CHECK(results[2]->ok());
}

TEST_CASE_METHOD(fixture, "a weighted route spreads calls by weight") {
  rt.add_simulated_source("light", answering(1ms));
  rt.add_simulated_source("heavy", answering(1ms));
  rt.add_route({"chat", "chat", {"light", "heavy"}, {1.0, 3.0}, {}});
  std::map<std::string, int> by_source;
  for (int i = 0; i < 400; ++i) {
    auto r = start("chat");
    advance(1ms);
    REQUIRE(*r);
    ++by_source[(*r)->source];
  }
  CHECK(by_source["heavy"] > 260); // about 300 of 400
  CHECK(by_source["heavy"] < 340);
  CHECK(by_source["light"] + by_source["heavy"] == 400);
}

TEST_CASE_METHOD(fixture, "actors can request a call from its governor") {
  rt.add_simulated_source("a", answering(1s));
  rt.add_route({"chat", "chat", {"a"}, {}, {}});
  auto gov = rt.spawn_call(call_request{"chat", "{}"});
  caf::scoped_actor self{sys};
  self->send(gov, call_atom_v);
  advance(1s);
  bool ok = false;
  self->receive([&](const call_result& r) { ok = r.ok(); },
                caf::after(0s) >> [] { FAIL("no result"); });
  CHECK(ok);
}

TEST_CASE_METHOD(fixture, "an idle session's tier is kept for its next call "
                          "and dropped after session_idle_ttl") {
  rt.add_simulated_source("sim", answering(1s));
  rt.add_route({"/r", "chat", {"sim"}, {}, {}});
  call_options opts;
  opts.session = "keep-alive client";
  auto first = rt.session(opts.session).owner;
  auto r = start("/r", opts);
  advance(2s);
  REQUIRE(r->has_value());
  CHECK((*r)->ok());
  // The call is over: the next one finds the same tier (no new actor).
  CHECK(rt.session(opts.session).owner == first);
  CHECK(rt.live_sessions().empty()); // idle sessions are not "live"
  // Held sessions are never dropped, however long their call takes.
  call_options busy;
  busy.session = "busy";
  auto busy_owner = rt.session(busy.session).owner;
  auto held = rt.session(busy.session);
  REQUIRE(held.counter->try_acquire());
  advance(runtime::session_idle_ttl + 1s);
  rt.session("someone else"); // sessions are swept as calls come in
  CHECK(rt.session(opts.session).owner != first);
  CHECK(rt.session(busy.session).owner == busy_owner);
  held.counter->release();
}

// -- the runtime watches the actors it spawns ---------------------------------

TEST_CASE_METHOD(fixture,
                 "a runtime actor that dies marks its source broken, never "
                 "healthy") {
  rt.add_simulated_source("a", answering(10ms));
  rt.add_simulated_source("b", answering(10ms));
  run();
  CHECK_FALSE(rt.broken("a"));
  CHECK(rt.broken_sources().empty());
  caf::anon_send_exit(rt.source("a").breaker.actor, caf::exit_reason::kill);
  run();
  CHECK(rt.broken("a"));
  CHECK_FALSE(rt.broken("b"));
  auto dead = rt.broken_sources();
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].first == "a");
  CHECK(dead[0].second.rfind("breaker:", 0) == 0);
  // The built-in source and the gate are watched as well.
  caf::anon_send_exit(rt.source("b").gate, caf::exit_reason::kill);
  run();
  CHECK(rt.broken("b"));
}

TEST_CASE("the startup check refuses a runtime whose actor died, naming the "
          "source") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  {
    runtime rt{sys, runtime_config{}};
    rt.add_simulated_source("good", answering(10ms));
    rt.add_simulated_source("victim", answering(10ms));
    rt.check_started(); // all alive: no throw
    caf::scoped_actor self{sys};
    auto gate = rt.source("victim").gate;
    self->monitor(gate);
    self->send_exit(gate, caf::exit_reason::kill);
    self->receive([](const caf::down_msg&) {});
    try {
      rt.check_started();
      FAIL("check_started accepted a dead gate");
    } catch (const config_error& e) {
      CHECK(e.key() == "sources.victim");
      CHECK(std::string{e.what()}.find("gate") != std::string::npos);
    }
    CHECK_FALSE(rt.broken("good"));
  }
  // Stopping the runtime is not a death: nothing is reported then.
}
