// The node on event loops (SPEC §9, issue 14): a call stays on the loop its
// connection lives on, HTTP sources own no thread, a blocking path on a
// loop is caught, and the loops stop cleanly with calls and upstream
// connections in flight. The rest of the node's suite (node_test,
// node_hostile_test, http_front_test, ...) runs on the loops too.

#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "log_capture.hpp"
#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"
#include "test_upstream.hpp"

using namespace sluice;
using namespace sluice::testing;
using namespace sluice::testing::loopback;
using namespace std::chrono_literals;
namespace http = boost::beast::http;
using json = nlohmann::json;

namespace {

size_t thread_count() {
  size_t n = 0;
  if (auto* d = opendir("/proc/self/task")) {
    while (auto* e = readdir(d))
      if (e->d_name[0] != '.')
        ++n;
    closedir(d);
  }
  return n;
}

std::string loops_config(const test_upstream& up, size_t loops,
                         const std::string& node_extra = "") {
  return "[node]\n" + node_extra + "loops = " + std::to_string(loops) +
         "\nshutdown_grace_s = 1\n\n"
         "[sources.up]\ntype = \"http\"\nbase_url = \"" +
         up.url("/ok") +
         "\"\n\n"
         "[sources.slow]\ntype = \"http\"\nbase_url = \"" +
         up.url("/slow") +
         "\"\n\n"
         "[routes.\"/v1/chat/completions\"]\nsources = [\"up\"]\n\n"
         "[routes.\"/slow\"]\nsources = [\"slow\"]\n";
}

// Listening TCP sockets (IPv4) on `port`, as the kernel lists them.
size_t listening_on(uint16_t port) {
  std::ifstream in{"/proc/net/tcp"};
  std::string line;
  std::getline(in, line); // the header
  size_t n = 0;
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  while (std::getline(in, line)) {
    std::istringstream fields{line};
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 &&
        local.compare(local.size() - 5, 5, want) == 0)
      ++n;
  }
  return n;
}

// A node as sluice-node builds it, on `loops` event loops, in front of
// `up` (the shared fixture, with this file's config).
struct loop_node : node_under_test {
  loop_node(const test_upstream& up, size_t loops,
            const std::string& node_extra = "")
      : node_under_test(loops_config(up, loops, node_extra)) {
    REQUIRE(cfg.node.scheduler == "loops"); // the default
  }

  loop_scheduler& loops() { return *loop_scheduler::of(*sys); }

  json status() {
    auto r = exchange(front->port(), http::verb::get, "/status");
    REQUIRE(r.status == 200);
    return r.doc();
  }
};

} // namespace

TEST_CASE("a call through an HTTP source stays on its connection's loop") {
  for (size_t n : {size_t{1}, size_t{2}}) {
    CAPTURE(n);
    test_upstream up;
    loop_node node{up, n};
    REQUIRE(node.loops().loops() == n);
    // Fresh connections, one call each: they take the loops in turn.
    for (int i = 0; i < 20; ++i) {
      auto r = exchange(node.front->port(), http::verb::post,
                        "/v1/chat/completions", "{}");
      REQUIRE(r.status == 200);
    }
    auto st = node.status();
    CHECK(st["loops"]["count"] == n);
    // The front's connection, the governor, the source actor and the
    // upstream connection all ran on the same loop: no result was handed
    // to a connection from another thread.
    CHECK(st["loops"]["cross_loop_posts"] == 0);
    CHECK(up.requests == 20);
  }
}

TEST_CASE("each loop accepts connections itself (SO_REUSEPORT), or one "
          "listener hands them out in turn") {
  for (std::string accept : {"reuseport", "handoff"}) {
    CAPTURE(accept);
    test_upstream up;
    loop_node node{up, 2, "accept = \"" + accept + "\"\n"};
    // Fresh connections, one call each. With a listener per loop the kernel
    // spreads them by their addresses (40 fresh ports: all on one loop has
    // odds of 2^-39); the hand-off takes the loops in turn.
    for (int i = 0; i < 40; ++i)
      REQUIRE(
          exchange(node.port(), http::verb::post, "/v1/chat/completions", "{}")
              .status == 200);
    auto st = node.status()["loops"];
    CHECK(st["accept"] == accept);
    // One listening socket per loop, or one.
    CHECK(listening_on(node.port()) == (accept == "reuseport" ? 2u : 1u));
    REQUIRE(st["accepted"].size() == 2);
    uint64_t a0 = st["accepted"][0], a1 = st["accepted"][1];
    CAPTURE(a0, a1);
    CHECK(a0 + a1 == 41); // and the /status request's own
    CHECK(a0 > 0);
    CHECK(a1 > 0);
    if (accept == "handoff") {
      CHECK(a0 >= 20);
      CHECK(a1 >= 20);
    }
    CHECK(st["cross_loop_posts"] == 0);
  }
}

TEST_CASE("listening on a port another listener holds fails, with a "
          "listener per loop too (SO_REUSEPORT would let both bind)") {
  test_upstream up;
  loop_node node{up, 2};
  REQUIRE(node.status()["loops"]["accept"] == "reuseport");
  for (std::string accept : {"reuseport", "handoff"}) {
    CAPTURE(accept);
    auto settings = node.cfg.node;
    settings.listen_port = node.port();
    settings.accept = accept;
    try {
      http_front second{*node.rt, settings};
      FAIL("a second front listened on the node's port");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("cannot listen on 127.0.0.1:" +
                                           std::to_string(node.port())) &&
                               Catch::Contains("in use"));
    }
  }
  // The node still serves.
  CHECK(exchange(node.port(), http::verb::post, "/v1/chat/completions", "{}")
            .status == 200);
  // Its shutdown closes every loop's listener, and its end lets go of the
  // address: a new front listens there.
  auto port = node.port();
  node.front->shutdown(0s);
  CHECK(listening_on(port) == 0);
  node.front.reset();
  auto settings = node.cfg.node;
  settings.listen_port = port;
  http_front again{*node.rt, settings};
  CHECK(listening_on(port) == 2);
  CHECK(exchange(port, http::verb::post, "/v1/chat/completions", "{}").status ==
        200);
}

TEST_CASE("concurrent calls on two loops: each attempt starts on its call's "
          "loop and each answer reaches its connection there") {
  test_upstream up;
  loop_node node{up, 2};
  // Eight clients at once, 25 calls each on fresh connections: the shared
  // source actor is busy on one loop while calls arrive on the other. Had
  // an attempt gone through it, its answer would come back on that loop.
  std::vector<std::future<int>> clients;
  for (int c = 0; c < 8; ++c)
    clients.push_back(std::async(std::launch::async, [&node] {
      int ok = 0;
      for (int i = 0; i < 25; ++i)
        ok += exchange(node.front->port(), http::verb::post,
                       "/v1/chat/completions", "{}")
                  .status == 200;
      return ok;
    }));
  for (auto& c : clients)
    CHECK(c.get() == 25);
  auto st = node.status();
  CHECK(st["loops"]["cross_loop_posts"] == 0);
  json src;
  for (auto& s : st["sources"])
    if (s["name"] == "up")
      src = s;
  INFO(src.dump());
  CHECK(src["attempts"]["total"] == 200);
  CHECK(src["attempts"]["direct"] == 200); // none through the source actor
  CHECK(up.requests == 200);
}

TEST_CASE("HTTP sources on the loops own no thread") {
  test_upstream up;
  caf::actor_system_config caf_cfg;
  add_error_category(caf_cfg);
  use_loop_scheduler(caf_cfg, 2);
  caf::actor_system sys{caf_cfg};
  sys.await_actors_before_shutdown(false);
  {
    runtime rt{sys, runtime_config{}};
    auto before = thread_count();
    std::vector<http_source> sources;
    for (int i = 0; i < 1000; ++i) {
      http_source_config cfg;
      cfg.base_url = up.url("/ok");
      sources.push_back(rt.add_http_source("up" + std::to_string(i), cfg, {}));
    }
    // A call on a few of them: each builds its client on the loop it runs.
    rt.add_route({"/a", "chat", {"up0"}, {}, {}});
    rt.add_route({"/b", "chat", {"up999"}, {}, {}});
    for (auto* route : {"/a", "/b"}) {
      call_request req;
      req.route = route;
      req.payload = "{}";
      auto res = rt.call(req).get();
      CHECK(res.ok());
    }
    auto after = thread_count();
    CAPTURE(before, after);
    // Under CAF's scheduler each source would add a thread (1,000 more).
    CHECK(after <= before + 2);
  }
}

TEST_CASE("a blocking call on a loop's thread is caught") {
  caf::actor_system_config caf_cfg;
  use_loop_scheduler(caf_cfg, 1);
  caf::actor_system sys{caf_cfg};
  auto& loops = *loop_scheduler::of(sys);
  // Count it instead of aborting (a sanitizer build aborts), for this test.
  struct count_only {
    count_only() { abort_on_blocking_loop(false); }
    ~count_only() { abort_on_blocking_loop(true); }
  } guard;
  auto before = blocking_calls_on_loops();
  assert_not_on_loop("off the loops: fine");
  CHECK(blocking_calls_on_loops() == before);
  // A real blocking path, run on a loop: joining a thread.
  auto ran = std::make_shared<std::promise<void>>();
  auto other = std::make_shared<upstream::io_thread>(sys, "loop guard test");
  other->start();
  boost::asio::post(loops.loop(0), [ran, mine = other]() mutable {
    mine->stop(); // blocks this loop until the other thread is joined
    // Not the last reference here: its destructor would stop it again on
    // this loop, after the test restored the abort.
    mine.reset();
    ran->set_value();
  });
  REQUIRE(ran->get_future().wait_for(10s) == std::future_status::ready);
  CHECK(blocking_calls_on_loops() == before + 1);
}

TEST_CASE("the loops stop with calls and upstream connections in flight") {
  test_upstream up;
  log_capture log;
  {
    loop_node node{up, 2};
    // Calls the upstream holds for 3 s; the node stops meanwhile.
    std::vector<std::future<reply>> calls;
    for (int i = 0; i < 8; ++i)
      calls.push_back(std::async(std::launch::async, [&node] {
        return exchange(node.front->port(), http::verb::post, "/slow", "{}");
      }));
    REQUIRE(eventually([&] { return up.requests == 8; }));
    node.front->shutdown(0s);
    for (auto& c : calls) {
      auto r = c.get();
      CHECK(r.status == 503); // answered shutting_down, not reset
    }
  } // the runtime, then the loops, go with calls' upstream exchanges open
  // Every upstream connection was closed by the node, none left open.
  CHECK(eventually([&] { return up.closed_by_client == 8; }));
  // ... as meant: the front closed its connections on the loops
  // and the sources stopped in time (no state left behind).
  CHECK_FALSE(log.has("did not close"));
  CHECK_FALSE(log.has("did not stop"));
}

TEST_CASE("embedded on a service's own io_contexts: a call made on a loop "
          "is answered there, its HTTP attempt started on that loop") {
  test_upstream up;
  boost::asio::io_context loop_a, loop_b;
  auto hold_a = boost::asio::make_work_guard(loop_a);
  auto hold_b = boost::asio::make_work_guard(loop_b);
  std::thread ta{[&] { loop_a.run(); }}, tb{[&] { loop_b.run(); }};
  auto id_of = [](std::thread& t) { return t.get_id(); };
  {
    caf::actor_system_config caf_cfg;
    add_error_category(caf_cfg);
    use_service_loops(caf_cfg, {&loop_a, &loop_b});
    caf::actor_system sys{caf_cfg};
    {
      runtime rt{sys, runtime_config{}};
      http_source_config http;
      http.base_url = up.url("/ok");
      auto src = rt.add_http_source("up", http, {});
      rt.add_route({"/a", "chat", {"up"}, {}, {}});
      struct answer {
        std::thread::id made_on, answered_on;
        call_status status;
      };
      for (int i = 0; i < 20; ++i) {
        auto& loop = i % 2 == 0 ? loop_a : loop_b;
        auto want = id_of(i % 2 == 0 ? ta : tb);
        auto out = std::make_shared<std::promise<answer>>();
        boost::asio::post(loop, [&rt, out] {
          call_request req;
          req.route = "/a";
          req.payload = "{}";
          auto made_on = std::this_thread::get_id();
          rt.call(std::move(req), [out, made_on](call_result r) {
            out->set_value({made_on, std::this_thread::get_id(), r.status});
          });
        });
        auto got = out->get_future();
        REQUIRE(got.wait_for(10s) == std::future_status::ready);
        auto a = got.get();
        CHECK(a.status == call_status::ok);
        CHECK(a.made_on == want);
        CHECK(a.answered_on == want); // no other thread on the way back
      }
      CHECK(src.stats->attempts == 20);
      CHECK(src.stats->direct_attempts == 20); // each on its caller's loop
    }
  } // the system stops while the service runs its loops
  hold_a.reset();
  hold_b.reset();
  ta.join(); // the loops return: the scheduler holds no more work on them
  tb.join();
  CHECK(up.requests == 20);
}
