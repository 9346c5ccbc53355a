// The breaker relay against a real Redis (continued): catch-up after a
// missed transition, forged and restarted generations, the probe lease.

#include "redis_shared.hpp"

using namespace redis_test_support;

namespace {

// The shared breaker state of `source` as a node would have published it.
void write_shared_state(const test_redis& server, const std::string& source,
                        const std::string& message) {
  redis_client c{server.config()};
  auto key = server.config().key_prefix + "breakers:state";
  REQUIRE(c.command({"HSET", key, source, message}).ok());
}

// Drops every subscription (all nodes' listeners): they subscribe again
// after `reconnect_after`.
void kill_subscribers(const test_redis& server) {
  redis_client c{server.config()};
  REQUIRE(c.command({"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
}

} // namespace

TEST_CASE_METHOD(actor_fixture,
                 "a relay that missed a transition catches up from the shared "
                 "state when it subscribes again, and at start",
                 "[redis]") {
  test_redis server;
  runtime_config rc;
  rc.redis = server.config();
  source_settings s;
  s.breaker.open_duration = 30s;
  // Written before the node starts: read when its breaker is watched.
  redis_client c{server.config()};
  REQUIRE(c.command({"TIME"}).ok());
  auto server_ms = [&] {
    auto t = c.command({"TIME"});
    return std::stoll(t.reply->elements[0].text) * 1000 +
           std::stoll(t.reply->elements[1].text) / 1000;
  };
  write_shared_state(server, "early",
                     R"({"node":"gone","source":"early","state":"open",)"
                     R"("open_for_ms":20000,"gen":4,"until_ms":)" +
                         std::to_string(server_ms() + 20000) + "}");
  // An opening whose period is over by the server's clock: not applied.
  write_shared_state(server, "late",
                     R"({"node":"gone","source":"late","state":"open",)"
                     R"("open_for_ms":20000,"gen":2,"until_ms":)" +
                         std::to_string(server_ms() - 1) + "}");
  runtime node{sys, rc};
  node.add_simulated_source("early", sim_config{}, s);
  node.add_simulated_source("late", sim_config{}, s);
  node.add_simulated_source("x", sim_config{}, s);
  node.add_route({"/x", "chat", {"x", "early", "late"}, {}, {}});
  CHECK(eventually([&] { return node.source("early").breaker.is_open(); },
                   2000ms));
  CHECK_FALSE(node.source("late").breaker.is_open());
  REQUIRE(eventually([&] { return breaker_listeners(server) == 1; }));
  auto resyncs = node.relay_stats()->resyncs.load();
  // Another node's opening of x, stored but never heard (as if published
  // while this node was cut off).
  write_shared_state(server, "x",
                     R"({"node":"other","source":"x","state":"open",)"
                     R"("open_for_ms":20000,"gen":9,"until_ms":)" +
                         std::to_string(server_ms() + 20000) + "}");
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(node.source("x").breaker.is_open());
  kill_subscribers(server);
  auto cut = clock_type::now();
  CHECK(eventually([&] { return node.source("x").breaker.is_open(); }, 2000ms));
  CHECK(clock_type::now() - cut < 1s);
  CHECK(node.relay_stats()->resyncs > resyncs);
  // The same transition heard late on the channel: stale, ignored; and an
  // older one (reordered) too.
  redis_client intruder{server.config()};
  auto channel = server.config().key_prefix + "breakers";
  auto stale = node.relay_stats()->stale.load();
  REQUIRE(intruder
              .command({"PUBLISH", channel,
                        R"({"node":"other","source":"x","state":"closed",)"
                        R"("gen":8})"})
              .ok());
  CHECK(eventually([&] { return node.relay_stats()->stale == stale + 1; }));
  CHECK(node.source("x").breaker.is_open());
  // A newer one applies.
  REQUIRE(intruder
              .command({"PUBLISH", channel,
                        R"({"node":"other","source":"x","state":"closed",)"
                        R"("gen":10})"})
              .ok());
  CHECK(eventually([&] { return !node.source("x").breaker.is_open(); }));
}

TEST_CASE_METHOD(actor_fixture,
                 "a forged generation on the breaker channel is checked "
                 "against the shared state: it moves no breaker and leaves "
                 "no real transition stale",
                 "[redis]") {
  test_redis server;
  shared_breaker_setup setup{server, 30s};
  auto node_a = setup.node(sys), node_b = setup.node(sys);
  auto& a = *node_a;
  auto& b = *node_b;
  REQUIRE(eventually([&] { return breaker_listeners(server) == 2; }));
  redis_client intruder{server.config()};
  auto channel = server.config().key_prefix + "breakers";
  auto forge = [&](const char* state, uint64_t gen) {
    REQUIRE(intruder
                .command({"PUBLISH", channel,
                          std::string{R"({"node":"evil","source":"x",)"} +
                              R"("state":")" + state +
                              R"(","open_for_ms":30000,"gen":)" +
                              std::to_string(gen) + "}"})
                .ok());
  };
  // A jump far past anything the publish script counted (below 2^53, so
  // it parses): read from the shared state instead, which holds nothing.
  forge("open", 9007199254740000);
  REQUIRE(eventually([&] {
    return a.relay_stats()->confirmed >= 1 && b.relay_stats()->confirmed >= 1;
  }));
  std::this_thread::sleep_for(100ms);
  CHECK_FALSE(a.source("x").breaker.is_open());
  CHECK_FALSE(b.source("x").breaker.is_open());
  // The real transitions still reach B (before the fix: dropped as stale
  // after the forged generation).
  auto open_a = [&] {
    for (int k = 0; k < 4; ++k)
      a.call(call_request{"/x", "{}"}).get();
    REQUIRE(
        eventually([&] { return a.source("x").breaker.is_open(); }, 2000ms));
  };
  open_a();
  CHECK(eventually([&] { return b.source("x").breaker.is_open(); }, 2000ms));
  caf::anon_send(a.source("x").breaker.actor, reset_atom_v);
  REQUIRE(eventually([&] { return !b.source("x").breaker.is_open(); }, 2000ms));
  // Forged as exactly the next generation: taken as heard (anyone who may
  // PUBLISH can send a transition), but the real transition that the
  // script then counts under the same generation overrules it.
  auto gen = [&] {
    auto r = intruder.command(
        {"HGET", server.config().key_prefix + "breakers:gen", "x"});
    REQUIRE(r.ok());
    return std::stoull(r.reply->text);
  };
  auto applied = b.relay_stats()->applied.load();
  forge("closed", gen() + 1);
  REQUIRE(eventually([&] { return b.relay_stats()->applied == applied + 1; }));
  open_a();
  CHECK(eventually([&] { return b.source("x").breaker.is_open(); }, 2000ms));
}

TEST_CASE_METHOD(
    actor_fixture,
    "after Redis restarts empty, a node's generations start over "
    "and the others still apply them, and a transition decided while "
    "it was down is told when it is back",
    "[redis]") {
  test_redis server;
  shared_breaker_setup setup{server, 30s};
  auto node_a = setup.node(sys), node_b = setup.node(sys);
  auto& a = *node_a;
  auto& b = *node_b;
  REQUIRE(eventually([&] { return breaker_listeners(server) == 2; }));
  auto open_a = [&] {
    for (int k = 0; k < 4; ++k)
      a.call(call_request{"/x", "{}"}).get();
  };
  open_a();
  REQUIRE(eventually([&] { return b.source("x").breaker.is_open(); }));
  caf::anon_send(a.source("x").breaker.actor, reset_atom_v);
  REQUIRE(eventually([&] { return !b.source("x").breaker.is_open(); }));
  // Redis restarts with nothing, and the source's generations start over
  // low (as if its clock had gone back): B must still apply A's next one.
  server.stop();
  server.start();
  REQUIRE(eventually([&] { return breaker_listeners(server) == 2; }));
  {
    redis_client c{server.config()};
    REQUIRE(c.command({"HSET", server.config().key_prefix + "breakers:gen", "x",
                       "5"})
                .ok());
  }
  // Calls fail closed until the scope backend sees Redis again.
  REQUIRE(eventually([&] {
    a.call(call_request{"/x", "{}"}).get();
    return a.source("x").breaker.is_open();
  }));
  CHECK(eventually([&] { return b.source("x").breaker.is_open(); }, 2000ms));
  // Decided while Redis is down: told when it is back.
  auto errors = a.relay_stats()->errors.load();
  server.stop();
  caf::anon_send(a.source("x").breaker.actor, reset_atom_v);
  REQUIRE(eventually([&] { return a.relay_stats()->errors > errors; }));
  std::this_thread::sleep_for(300ms);
  CHECK(b.source("x").breaker.is_open());
  server.start();
  CHECK(eventually([&] { return !b.source("x").breaker.is_open(); }, 3000ms));
}

TEST_CASE_METHOD(actor_fixture,
                 "three nodes whose shared breaker's open period ends: one "
                 "takes the cluster's probe lease, the others stay open",
                 "[redis]") {
  test_redis server;
  shared_breaker_setup setup{server, 1s};
  std::vector<std::unique_ptr<runtime>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(setup.node(sys));
  REQUIRE(eventually([&] { return breaker_listeners(server) == 3; }));
  for (int k = 0; k < 4; ++k)
    nodes[0]->call(call_request{"/x", "{}"}).get();
  auto state = [&](int i) {
    return nodes[i]->source("x").breaker.mirror->load().state;
  };
  REQUIRE(eventually([&] {
    return state(0) == breaker_state::open && state(1) == breaker_state::open &&
           state(2) == breaker_state::open;
  }));
  auto sum = [&](auto field) {
    uint64_t n = 0;
    for (auto& node : nodes)
      n += ((*node->relay_stats()).*field).load();
    return n;
  };
  // Past the open period: exactly one node half-opens.
  REQUIRE(eventually(
      [&] {
        return sum(&breaker_relay_stats::probes_claimed) == 1 &&
               sum(&breaker_relay_stats::probes_deferred) == 2;
      },
      2000ms));
  int half_open = 0, open = 0;
  for (int i = 0; i < 3; ++i) {
    half_open += state(i) == breaker_state::half_open;
    open += state(i) == breaker_state::open;
  }
  CHECK(half_open == 1);
  CHECK(open == 2);
}

TEST_CASE_METHOD(actor_fixture,
                 "a probe lease without a TTL (written by hand) is taken over, "
                 "not waited on for ever",
                 "[redis]") {
  test_redis server;
  shared_breaker_setup setup{server, 300ms};
  auto node_x = setup.node(sys);
  auto& node = *node_x;
  REQUIRE(eventually([&] { return breaker_listeners(server) == 1; }));
  redis_client c{server.config()};
  REQUIRE(c.command({"SET", server.config().key_prefix + "breakers:probe:x",
                     "someone"})
              .ok());
  for (int k = 0; k < 4; ++k)
    node.call(call_request{"/x", "{}"}).get();
  // Opened once the breaker has the last outcome (it may come after the
  // call's answer), and perhaps half-open already on a slow machine.
  REQUIRE(eventually([&] {
    return node.source("x").breaker.mirror->load().state !=
           breaker_state::closed;
  }));
  CHECK(eventually(
      [&] {
        return node.source("x").breaker.mirror->load().state ==
               breaker_state::half_open;
      },
      2000ms));
  CHECK(node.relay_stats()->probes_claimed == 1);
  CHECK(node.relay_stats()->probes_deferred == 0);
}
