// sluice-node end to end: the node is built from config TEXT through the
// config-file API (the path sluice-node takes), its sources are HTTP
// sources in front of the shared test upstream, and the test talks to the
// HTTP front over real sockets. Each case asserts what a user of the node
// sees: statuses, bodies, headers, /status and /events.

#include "node_shared.hpp"

using namespace node_test_support;

TEST_CASE_METHOD(node_fixture, "node: a call is answered by its HTTP upstream",
                 "[node]") {
  auto r = post("/v1/chat/completions", R"({"messages":[]})");
  CHECK(r.status == 200);
  CHECK(r.body == R"({"ok":true})");
  CHECK(upstream.requests == 1);
  auto h = exchange(port(), http::verb::get, "/healthz");
  CHECK(h.status == 200);
}

TEST_CASE_METHOD(node_fixture,
                 "node: a 429 with Retry-After is retried once after the wait",
                 "[node]") {
  auto start = clk::now();
  auto r = post("/v1/retry");
  auto elapsed = clk::now() - start;
  CHECK(r.status == 200);
  CHECK(r.body == R"({"ok":true,"after":"429"})");
  CHECK(upstream.requests == 2); // the 429, then exactly one retry
  // The retry honoured Retry-After: 1 (and did not take forever).
  CHECK(elapsed >= 900ms);
  CHECK(elapsed < 5s);
}

TEST_CASE_METHOD(node_fixture,
                 "node: a failing source fails over to the next one",
                 "[node]") {
  auto r = post("/v1/failover");
  CHECK(r.status == 200);
  CHECK(r.body == R"({"ok":true})");
  CHECK(upstream.requests == 2); // down-src's 503, then ok-src
}

TEST_CASE_METHOD(node_fixture,
                 "node: a source's own status rules - a custom retriable "
                 "status is retried elsewhere, a custom permanent one is not",
                 "[node]") {
  SECTION("418 classed transient fails over") {
    auto r = post("/v1/teapot");
    CHECK(r.status == 200);
    CHECK(r.body == R"({"ok":true})");
    CHECK(upstream.requests == 2); // the 418, then ok-src
  }
  SECTION("503 classed permanent fails fast with the upstream's answer") {
    auto r = post("/v1/down-final");
    CHECK(r.status == 503);
    CHECK(r.body == R"({"error":"down"})");
    CHECK(upstream.requests == 1); // no failover
  }
  SECTION("an empty 200 is a failure where the source says so") {
    auto r = post("/v1/empty");
    CHECK(r.status == 200);
    CHECK(r.body == R"({"ok":true})");
    CHECK(upstream.requests == 2);
  }
  SECTION("and a success by default") {
    auto r = post("/v1/empty-ok");
    CHECK(r.status == 200);
    CHECK(r.body.empty());
    CHECK(upstream.requests == 1);
  }
}

TEST_CASE_METHOD(node_fixture,
                 "node: an ejection limit keeps a route serving - one of two "
                 "failing sources is taken out, the other held in service",
                 "[node]") {
  upstream.failing = true;
  // One attempt per call, each failing: without the limit both breakers
  // (two failures each) would open and the route would have no source.
  for (int i = 0; i < 8; ++i) {
    auto r = post("/v1/ejection");
    INFO("call " << i << ": " << r.body);
    CHECK(r.status == 503);
  }
  std::string a, b;
  CHECK(eventually(
      [&] {
        a = breaker_state("ej-a");
        b = breaker_state("ej-b");
        return (a == "open" && b == "closed") || (a == "closed" && b == "open");
      },
      5s));
  INFO("ej-a " << a << ", ej-b " << b);
  auto held = a == "closed" ? "ej-a" : "ej-b";
  auto st = status();
  auto& lim = st["ejection_limits"]["/v1/ejection"];
  CHECK(lim["sources"] == 2);
  CHECK(lim["ejected"] == 1);
  CHECK(lim["allowed"] == 1);
  CHECK(lim["held"] == json::array({held}));
  CHECK((*source_in(st, held))["held_past_ejection_limit"] == true);
  // Every call still reached an upstream: none was refused for want of a
  // source.
  CHECK(upstream.requests == 8);
  // The upstream recovers: the held source answers at once (the other
  // stays open for its 120 s).
  upstream.failing = false;
  for (int i = 0; i < 2; ++i) { // two successes clear its window's verdict
    auto r = post("/v1/ejection");
    CHECK(r.status == 200);
    CHECK(r.body == R"({"ok":true})");
  }
  CHECK(eventually(
      [&] {
        return (*source_in(status(), held))["held_past_ejection_limit"] ==
               false;
      },
      5s));
}

TEST_CASE_METHOD(node_fixture,
                 "node: a slow source is hedged - the second source's answer "
                 "wins and the slow upstream request is closed",
                 "[node]") {
  auto start = clk::now();
  auto r = post("/v1/hedge");
  auto took = clk::now() - start;
  CHECK(r.status == 200);
  CHECK(r.body == R"({"ok":true})"); // ok-src's answer
  CHECK(took < 2s);                  // not the slow upstream's 3 s
  CHECK(upstream.requests == 2);
  // The losing attempt's upstream connection is closed, not left to run.
  CHECK(eventually([&] { return upstream.closed_by_client == 1; }, 5s));
  CHECK(eventually([&] { return all_returned(status()); }, 5s));
}

TEST_CASE_METHOD(node_fixture,
                 "node: a failing source's breaker opens and recovers through "
                 "a probe - seen in /status and /events",
                 "[node]") {
  stream_client events{port()};
  events.send(http::verb::get, "/events");
  REQUIRE(events.read_until("\r\n\r\n"));
  CHECK(events.all.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(events.has("text/event-stream"));
  REQUIRE(breaker_state("flaky") == "closed");

  upstream.failing = true;
  // window_size = min_samples = 4, threshold 0.5: four failed calls (one
  // attempt each) open it.
  for (int i = 0; i < 4; ++i) {
    auto r = post("/v1/breaker");
    INFO("call " << i << ": " << r.body);
    CHECK(r.status == 503);
    CHECK(r.doc()["error"]["code"] == "all_sources_exhausted");
  }
  CHECK(eventually([&] { return breaker_state("flaky") == "open"; }, 5s));
  CHECK(events.read_until(R"("source":"flaky","to":"open")", 5s));
  CHECK(events.has("event: breaker"));

  // The upstream recovers; past open_duration (1 s) the breaker is
  // half-open and the next call is its probe.
  upstream.failing = false;
  auto opened = clk::now();
  CHECK(eventually([&] { return breaker_state("flaky") == "half_open"; }, 5s));
  CHECK(clk::now() - opened < 3s);
  auto r = post("/v1/breaker");
  CHECK(r.status == 200);
  CHECK(r.body == R"({"ok":true})");
  CHECK(eventually([&] { return breaker_state("flaky") == "closed"; }, 5s));
  CHECK(events.read_until(R"("source":"flaky","to":"closed")", 5s));
  INFO("events: " << events.all);
  auto open_at = events.all.find(R"("source":"flaky","to":"open")");
  auto half_at = events.all.find(R"("source":"flaky","to":"half_open")");
  auto closed_at = events.all.find(R"("source":"flaky","to":"closed")");
  REQUIRE(open_at != std::string::npos);
  REQUIRE(half_at != std::string::npos);
  REQUIRE(closed_at != std::string::npos);
  CHECK(open_at < half_at);
  CHECK(half_at < closed_at);
  CHECK(events.has(R"("from":"half_open")"));
  events.close();
}

TEST_CASE_METHOD(node_fixture,
                 "node: a full session answers the surplus with tool_busy 503 "
                 "and Retry-After",
                 "[node]") {
  // session_cap 2, wait_timeout 0.2 s; the slow upstream holds each call
  // for 3 s.
  std::vector<reply> replies(4);
  std::vector<clk::duration> took(4);
  std::vector<std::thread> clients;
  auto start = clk::now();
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      replies[i] = post("/v1/slow", "{}", "crowd");
      took[i] = clk::now() - start;
    });
  for (auto& t : clients)
    t.join();
  std::string all;
  for (int i = 0; i < 4; ++i)
    all += "\n  after " +
           std::to_string(
               std::chrono::duration_cast<std::chrono::milliseconds>(took[i])
                   .count()) +
           " ms: " + std::to_string(replies[i].status) + " " + replies[i].body;
  INFO("replies:" << all);
  int ok = 0;
  int busy = 0;
  for (auto& r : replies) {
    if (r.status == 200) {
      ++ok;
      continue;
    }
    ++busy;
    CHECK(r.status == 503);
    auto doc = r.doc();
    CHECK(doc.is_object());
    if (!doc.is_object())
      continue;
    CHECK(doc["error"]["sluice_code"] == -32016);
    CHECK(doc["error"]["code"] == "tool_busy");
    CHECK(doc["error"]["tier"] == "session");
    CHECK_FALSE(r.retry_after.empty());
  }
  CHECK(ok == 2);
  CHECK(busy == 2);
  CHECK(upstream.requests == 2); // the surplus never reached the upstream
  CHECK(eventually([&] { return all_returned(status()); }, 5s));
}

TEST_CASE_METHOD(node_fixture,
                 "node: a client leaving mid-call frees every tier and closes "
                 "the upstream request",
                 "[node]") {
  stream_client c{port()};
  c.send(http::verb::post, "/v1/slow", "{}");
  // The call is at the upstream.
  REQUIRE(eventually([&] { return upstream.requests == 1; }, 5s));
  REQUIRE(eventually(
      [&] {
        auto st = status();
        auto s = source_in(st, "slow-src");
        return s && (*s)["in_flight"] == 1 &&
               st["tiers"]["global"]["in_use"] == 1;
      },
      5s));
  c.close();
  auto closed_at = clk::now();
  json last;
  bool clear = false;
  auto deadline = closed_at + 5s;
  while (!clear && clk::now() < deadline) {
    last = status();
    clear = all_returned(last);
  }
  auto took = clk::now() - closed_at;
  INFO("last /status: " << last.dump());
  INFO("took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
       << " ms");
  CHECK(clear);
  CHECK(took < 100ms);
  CHECK(eventually([&] { return upstream.closed_by_client == 1; }, 5s));
  CHECK(eventually([&] { return status()["calls_in_flight"] == 0; }, 5s));
  CHECK(upstream.requests == 1);
}
