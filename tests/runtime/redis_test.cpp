// The Redis backend against a redis-server of the test's own: the client
// (scripts, reconnecting after a restart), the scope backend shared by two
// nodes (progress seen across them, fail-closed while Redis is down,
// recovery with no manual step), the stall verdict across two runtimes, and
// the cluster lease pool (a shared cap, release, renewal, lapse, contention).
// Real time: Redis has its own clock; windows are kept short.

#include "redis_shared.hpp"

using namespace redis_test_support;

TEST_CASE("redis_client runs commands and scripts and reconnects after the "
          "server restarts",
          "[redis]") {
  test_redis server;
  redis_client c{server.config()};
  REQUIRE(c.command({"SET", c.key("k"), "v"}).ok());
  auto got = c.command({"GET", c.key("k")});
  REQUIRE(got.ok());
  CHECK(got.reply->text == "v");
  auto sum =
      c.eval("return tonumber(ARGV[1]) + tonumber(ARGV[2])", {}, {"40", "2"});
  REQUIRE(sum.ok());
  CHECK(sum.reply->integer == 42);
  // A server error is an error, not a reply.
  auto bad = c.command({"INCR", c.key("k")});
  CHECK_FALSE(bad.ok());
  CHECK_FALSE(bad.error.empty());
  // Down: errors, quickly (the timeouts are 200 ms).
  server.stop();
  auto t0 = clock_type::now();
  auto down = c.command({"GET", c.key("k")});
  CHECK_FALSE(down.ok());
  CHECK(clock_type::now() - t0 < 2s);
  // Back (empty: nothing persisted): the same client works again, and the
  // script is loaded anew (the new server has never seen it).
  server.start();
  CHECK(eventually([&] { return c.command({"PING"}).ok(); }));
  auto again =
      c.eval("return tonumber(ARGV[1]) + tonumber(ARGV[2])", {}, {"1", "2"});
  REQUIRE(again.ok());
  CHECK(again.reply->integer == 3);
  redis_config nameless;
  nameless.host.clear();
  CHECK_THROWS_WITH(redis_client{nameless}, Catch::StartsWith("address:"));
}

TEST_CASE_METHOD(actor_fixture,
                 "the Redis backend shares scope progress between nodes and "
                 "fails closed while Redis is down",
                 "[redis]") {
  test_redis server;
  auto stats = std::make_shared<redis_backend_stats>();
  auto node_a = spawn_redis_scope_backend(sys, server.config(), 1h, stats);
  auto node_b = spawn_redis_scope_backend(sys, server.config(), 1h);
  // Never progressed: +infinity.
  auto never = age(node_b, "shared");
  REQUIRE(never);
  CHECK_FALSE(never->age.has_value());
  // A success on node A is seen by node B.
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  REQUIRE(eventually([&] {
    auto a = age(node_b, "shared");
    return a && a->age.has_value();
  }));
  auto seen = age(node_b, "shared");
  REQUIRE(seen);
  CHECK(*seen->age < 2s);
  // Another prefix is another deployment: it sees nothing.
  auto other = spawn_redis_scope_backend(sys, server.config("other:"), 1h);
  auto elsewhere = age(other, "shared");
  REQUIRE(elsewhere);
  CHECK_FALSE(elsewhere->age.has_value());
  // Redis down: reads fail closed, quickly; writes are only counted.
  server.stop();
  auto t0 = clock_type::now();
  auto failed = age(node_a, "shared");
  REQUIRE_FALSE(failed);
  CHECK(is(failed.error(), errc::governance_backend_error));
  CHECK(clock_type::now() - t0 < 2s);
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  CHECK(eventually([&] { return stats->write_errors >= 1; }));
  CHECK(stats->read_errors >= 1);
  // Redis back: service resumes with no manual step (the restarted server
  // is empty, so the scope never progressed).
  server.start();
  CHECK(eventually([&] { return static_cast<bool>(age(node_a, "shared")); }));
  caf::anon_send(node_a, progress_atom_v, std::string{"shared"});
  CHECK(eventually([&] {
    auto a = age(node_b, "shared");
    return a && a->age.has_value();
  }));
  for (auto& b : {node_a, node_b, other})
    caf::anon_send_exit(b, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(actor_fixture,
                 "a success on node A clears the stall condition for a call "
                 "on node B",
                 "[redis]") {
  test_redis server;
  runtime_config rc;
  rc.redis = server.config();
  auto& k = rc.kinds["chat"];
  k.stall_window = 1s;
  k.max_attempts = 1000;
  k.attempt_timeout = 1s;
  k.backoff = {50ms, 100ms, 0.0};
  k.poll_interval = 100ms;
  k.rate_limit_spends_retry = false;
  runtime node_a{sys, rc};
  runtime node_b{sys, rc};
  sim_config healthy;
  healthy.phases[0].latency_min = healthy.phases[0].latency_max = 5ms;
  sim_config saturated = healthy; // always 429
  saturated.phases[0].rate_limit_rate = 1.0;
  node_a.add_simulated_source("ok", healthy);
  node_b.add_simulated_source("busy", saturated);
  // Same scope on both nodes: their progress is judged together.
  node_a.add_route({"/a", "chat", {"ok"}, {}, "shared"});
  node_b.add_route({"/b", "chat", {"busy"}, {}, "shared"});
  std::optional<call_result> verdict;
  std::mutex mx;
  auto t0 = clock_type::now();
  node_b.call(call_request{"/b", "{}"}, [&](call_result r) {
    std::lock_guard<std::mutex> guard{mx};
    verdict = std::move(r);
  });
  auto done = [&] {
    std::lock_guard<std::mutex> guard{mx};
    return verdict.has_value();
  };
  // While node A keeps succeeding, B's saturated call is not stalled, long
  // past its 1 s window.
  while (clock_type::now() - t0 < 2500ms) {
    REQUIRE(node_a.call(call_request{"/a", "{}"}).get().ok());
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(done());
  // Once A stops, the scope's marker ages past the window: B stalls.
  auto quiet = clock_type::now();
  REQUIRE(eventually(done, 5000ms));
  std::lock_guard<std::mutex> guard{mx};
  CHECK(verdict->status == call_status::all_sources_exhausted);
  CHECK(verdict->reason == "stalled");
  // Not before the marker aged a window (A's last success was at most
  // ~0.1 s before it went quiet).
  CHECK(clock_type::now() - quiet >= 800ms);
}

TEST_CASE("cluster leases: a cap shared by nodes, released, renewed, and "
          "lapsing for a node that stopped",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  lease_pool a{ca, "global", 3, 300ms, "node-a"};
  lease_pool b{cb, "global", 3, 300ms, "node-b"};
  // Three leases in all, whichever node asks.
  auto a1 = a.try_acquire();
  auto a2 = a.try_acquire();
  auto b1 = b.try_acquire();
  REQUIRE((a1.granted && a2.granted && b1.granted));
  auto full = b.try_acquire();
  CHECK(full.answered);
  CHECK_FALSE(full.granted);
  CHECK(a.live() == 3);
  // Released on completion: the other node may take it at once.
  REQUIRE(a.release(a1.permit));
  auto b2 = b.try_acquire();
  CHECK(b2.granted);
  // Renewed while held: B's leases outlive several TTLs.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    auto lapsed = b.renew({b1.permit, b2.permit});
    REQUIRE(lapsed.has_value());
    CHECK(lapsed->empty());
  }
  // A stopped renewing (as if killed -9): its lease lapses within one TTL,
  // and B can use it again; B's renewed leases are still there.
  CHECK(b.live() == 2);
  CHECK(b.try_acquire().granted);
  CHECK_FALSE(b.try_acquire().granted);
  // A renewing a lapsed lease learns it lost it.
  auto lost = a.renew({a2.permit});
  REQUIRE(lost.has_value());
  CHECK(*lost == std::vector<std::string>{a2.permit});
  // Redis down: an error, not "full" -- the caller must fail closed.
  server.stop();
  auto down = a.try_acquire();
  CHECK_FALSE(down.answered);
  CHECK_FALSE(down.error.empty());
  CHECK(a.live() == -1);
}

TEST_CASE("cluster leases never exceed the cap under concurrent nodes",
          "[redis]") {
  test_redis server;
  constexpr uint32_t cap = 5;
  // Catch2's assertions are not for other threads: count, check after.
  std::atomic<int> held{0}, most{0}, granted{0}, refused{0}, errors{0};
  std::vector<std::thread> nodes;
  for (int n = 0; n < 6; ++n)
    nodes.emplace_back([&, n] {
      redis_client c{server.config()};
      lease_pool pool{c, "contended", cap, 5s, "node-" + std::to_string(n)};
      for (int i = 0; i < 150; ++i) {
        auto got = pool.try_acquire();
        if (!got.answered) {
          ++errors;
          continue;
        }
        if (!got.granted) {
          ++refused;
          continue;
        }
        ++granted;
        auto now = ++held;
        for (auto m = most.load();
             now > m && !most.compare_exchange_weak(m, now);)
          ;
        std::this_thread::sleep_for(std::chrono::microseconds{200});
        --held; // counted out before Redis hears of it: never above Redis
        if (!pool.release(got.permit))
          ++errors;
      }
    });
  for (auto& t : nodes)
    t.join();
  INFO("granted " << granted << ", refused " << refused);
  CHECK(errors == 0);
  CHECK(most <= static_cast<int>(cap));
  CHECK(most >= 2);   // the nodes really did overlap
  CHECK(refused > 0); // and were really held to the cap
  redis_client c{server.config()};
  lease_pool probe{c, "contended", cap, 5s, "probe"};
  CHECK(probe.live() == 0); // everything was given back
}

TEST_CASE_METHOD(actor_fixture,
                 "the global tier across nodes holds its cap, waits under the "
                 "admission deadline, and fails closed without Redis",
                 "[redis]") {
  test_redis server;
  runtime_config rc;
  rc.redis = server.config();
  rc.cluster_global_cap = 2;
  rc.lease_ttl = 1s;
  rc.admission.wait_timeout = 400ms;
  runtime node_a{sys, rc};
  runtime node_b{sys, rc};
  sim_config hang; // answers only when told to stop hanging: never
  hang.phases[0].hang_rate = 1.0;
  node_a.add_simulated_source("hang", hang);
  node_b.add_simulated_source("hang", hang);
  node_a.add_route({"/r", "chat", {"hang"}, {}, {}});
  node_b.add_route({"/r", "chat", {"hang"}, {}, {}});
  // What the callbacks fill in; shared, since a cancelled call reports on
  // an actor thread, possibly after this test returned.
  struct seen {
    std::mutex mx;
    std::vector<call_result> results;
    std::optional<call_result> later, refused;
  };
  auto box = std::make_shared<seen>();
  auto& mx = box->mx;
  auto& results = box->results;
  auto record = [box](call_result r) {
    std::lock_guard<std::mutex> guard{box->mx};
    box->results.push_back(std::move(r));
  };
  auto ended = [box] {
    std::lock_guard<std::mutex> guard{box->mx};
    return box->results.size();
  };
  // Two calls hold the cluster's two permits, one on each node.
  auto first = node_a.call(call_request{"/r", "{}"}, record);
  auto second = node_b.call(call_request{"/r", "{}"}, record);
  redis_client probe_client{server.config()};
  lease_pool probe{probe_client, "global", 2, 1s, "probe"};
  REQUIRE(eventually([&] { return probe.live() == 2; }));
  // A third, on either node, waits one admission deadline, then tool_busy
  // naming the global tier.
  auto t0 = clock_type::now();
  node_a.call(call_request{"/r", "{}"}, record);
  REQUIRE(eventually([&] { return ended() == 1; }));
  {
    std::lock_guard<std::mutex> guard{mx};
    CHECK(results[0].status == call_status::tool_busy);
    CHECK(results[0].busy_tier == tier_kind::global);
  }
  CHECK(clock_type::now() - t0 >= 350ms);
  // A waiter is admitted as soon as a holder on another node lets go.
  auto& later = box->later;
  auto waiting = node_b.call(call_request{"/r", "{}"}, [box](call_result r) {
    std::lock_guard<std::mutex> guard{box->mx};
    box->later = std::move(r);
  });
  std::this_thread::sleep_for(50ms);
  first.cancel(); // node A's call ends: its lease goes back
  REQUIRE(eventually([&] { return ended() == 2; })); // the cancelled one
  std::this_thread::sleep_for(500ms); // past the deadline, had it waited
  {
    std::lock_guard<std::mutex> guard{mx};
    CHECK_FALSE(later.has_value()); // admitted: now hanging upstream
  }
  CHECK(probe.live() == 2);
  // Redis down: new calls fail closed, promptly.
  server.stop();
  auto& refused = box->refused;
  node_a.call(call_request{"/r", "{}"}, [box](call_result r) {
    std::lock_guard<std::mutex> guard{box->mx};
    box->refused = std::move(r);
  });
  REQUIRE(eventually(
      [&] {
        std::lock_guard<std::mutex> guard{mx};
        return refused.has_value();
      },
      3000ms));
  std::lock_guard<std::mutex> guard{mx};
  CHECK(refused->status == call_status::governance_backend_error);
  second.cancel();
  waiting.cancel();
}

TEST_CASE_METHOD(actor_fixture,
                 "a breaker opened on node A is open on B and C within 1 s, "
                 "and closes there when A's closes",
                 "[redis]") {
  test_redis server;
  shared_breaker_setup setup{server, 30s};
  std::vector<std::unique_ptr<runtime>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(setup.node(sys));
  auto is_open = [&](int i) { return nodes[i]->source("x").breaker.is_open(); };
  REQUIRE(eventually([&] { return breaker_listeners(server) == 3; }));
  // Only node A pays the failures.
  for (int k = 0; k < 4; ++k)
    nodes[0]->call(call_request{"/x", "{}"}).get();
  REQUIRE(eventually([&] { return is_open(0); }, 2000ms));
  auto opened = clock_type::now();
  CHECK(eventually([&] { return is_open(1) && is_open(2); }, 1000ms));
  CHECK(clock_type::now() - opened < 1s);
  // B and C cut the source off without a single failure of their own.
  auto r = nodes[1]->call(call_request{"/x", "{}"}).get();
  CHECK(r.status == call_status::all_sources_exhausted);
  CHECK(r.attempts.empty());
  // A's breaker closes (an operator reset): so do the others'.
  caf::anon_send(nodes[0]->source("x").breaker.actor, reset_atom_v);
  CHECK(eventually([&] { return !is_open(1) && !is_open(2); }, 1000ms));
  // Nothing echoes back: A stays closed, and only A published -- its
  // opening and its closing; B and C applied both and published neither.
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(is_open(0));
  CHECK(nodes[0]->relay_stats()->published == 2);
  CHECK(nodes[1]->relay_stats()->published == 0);
  CHECK(nodes[2]->relay_stats()->published == 0);
  CHECK(nodes[1]->relay_stats()->applied == 2);
  CHECK(nodes[2]->relay_stats()->applied == 2);
  CHECK(nodes[0]->relay_stats()->applied == 0);
}

TEST_CASE_METHOD(actor_fixture,
                 "junk on the breaker channel is ignored and the relay keeps "
                 "listening",
                 "[redis]") {
  test_redis server;
  runtime_config rc;
  rc.redis = server.config();
  source_settings s;
  s.breaker.open_duration = 30s;
  runtime node{sys, rc};
  node.add_simulated_source("x", sim_config{}, s);
  node.add_route({"/x", "chat", {"x"}, {}, {}});
  REQUIRE(eventually([&] { return breaker_listeners(server) == 1; }));
  redis_client intruder{server.config()};
  auto channel = server.config().key_prefix + "breakers";
  std::vector<std::string> junk = {
      "not json",
      R"({"node":null,"source":"x","state":"open"})",
      R"({"node":"i","source":"x","state":"open","open_for_ms":"5"})",
      R"({"node":"i","source":"x","state":"open","open_for_ms":1e300})",
      R"({"node":"i","source":["x"],"state":"open"})",
      std::string(1 << 20, '{'), // 1 MiB: past max_peer_message, skipped
  };
  for (auto& j : junk)
    REQUIRE(intruder.command({"PUBLISH", channel, j}).ok());
  // Then a real transition, with an open period past INT_MAX ms: applied,
  // saturated (the breaker bounds it by its own open_duration_max).
  REQUIRE(intruder
              .command({"PUBLISH", channel,
                        R"({"node":"i","source":"x","state":"open",)"
                        R"("open_for_ms":99999999999999})"})
              .ok());
  CHECK(eventually([&] { return node.source("x").breaker.is_open(); }, 2000ms));
  CHECK(node.relay_stats()->ignored == junk.size() - 1);
  CHECK(node.relay_stats()->applied == 1);
}

TEST_CASE("a release while the cap was reached tells the other nodes, and a "
          "full answer names the earliest lapse",
          "[redis]") {
  test_redis server;
  redis_client ca{server.config()}, cb{server.config()};
  lease_pool a{ca, "global", 2, 2s, "node-a"};
  lease_pool b{cb, "global", 2, 2s, "node-b"};
  std::mutex mx;
  std::vector<std::string> heard;
  redis_subscriber::handlers h;
  h.message = [&](const std::string& who) {
    std::lock_guard<std::mutex> guard{mx};
    heard.push_back(who);
  };
  std::atomic<int> subscribed{0};
  h.subscribed = [&] { ++subscribed; };
  auto sub = redis_subscriber::start(nullptr, server.config(),
                                     a.freed_channel(), 256, h);
  REQUIRE(eventually([&] { return subscribed == 1; }));
  auto a1 = a.try_acquire();
  REQUIRE(a1.granted);
  // Not full: a release tells nobody.
  REQUIRE(a.release(a1.permit));
  a1 = a.try_acquire();
  auto a2 = a.try_acquire();
  REQUIRE((a1.granted && a2.granted));
  auto full = b.try_acquire();
  REQUIRE(full.answered);
  CHECK_FALSE(full.granted);
  // The earliest lease lapses within its TTL, unless renewed.
  CHECK(full.retry_in > 1500ms);
  CHECK(full.retry_in <= 2s);
  REQUIRE(a.release(a2.permit));
  CHECK(eventually([&] {
    std::lock_guard<std::mutex> guard{mx};
    return heard.size() == 1;
  }));
  std::this_thread::sleep_for(100ms);
  std::lock_guard<std::mutex> guard{mx};
  CHECK(heard == std::vector<std::string>{"node-a"});
  sub->stop();
}
