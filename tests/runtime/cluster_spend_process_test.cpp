// Token limits and budgets shared by sluice-node processes through one
// Redis (SPEC §12; the built binary, real signals): three nodes hold a
// key's tokens per minute and its budget together under more load than
// either allows (never more than the calls in flight at the moment it ran
// out), a node killed with -9 leaks no reservation beyond its TTL, and
// Redis down refuses calls under a limit or, by the setting, lets the node
// count alone.
//
// The simulated source's chat answer to the message "hi" uses 1 prompt and
// 10 completion tokens; the node reserves 1 + 4 + 3 prompt tokens and
// default_max_tokens = 10: 18 reserved, 11 used, at $1 a token.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <stdlib.h>

#include "loopback_http.hpp"
#include "node_process.hpp"
#include "sluice/runtime/redis/shared_limits.hpp"
#include "test_redis.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::node_process;
using sluice::testing::test_redis;
using sluice::testing::write_config;
using namespace sluice::testing::loopback;

namespace {

constexpr const char* team_key = "key-team-0123456789abcdef";
constexpr const char* admin_key = "admin-key-0123456789abcdef";

std::string cluster_config(const test_redis& redis, const std::string& prefix,
                           const std::string& limits, int latency_ms,
                           const std::string& backend_extra = "") {
  ::setenv("SLUICE_TEST_TEAM_KEY", team_key, 1);
  ::setenv("SLUICE_TEST_ADMIN_KEY", admin_key, 1);
  auto ms = std::to_string(latency_ms);
  return "[node]\naccess_log = \"off\"\ndefault_max_tokens = 10\n"
         "[backend]\ntype = \"redis\"\naddress = \"127.0.0.1:" +
         std::to_string(redis.port()) + "\"\nkey_prefix = \"" + prefix +
         "\"\n" + backend_extra +
         "[auth]\nadmin_key = \"env:SLUICE_TEST_ADMIN_KEY\"\n"
         "[auth.keys.team]\nkey = \"env:SLUICE_TEST_TEAM_KEY\"\n" +
         limits +
         "\n[sources.sim]\ntype = \"simulated\"\n"
         "  [[sources.sim.phases]]\n  latency_min_ms = " +
         ms + "\n  latency_max_ms = " + ms +
         "\n[routes.\"/v1/chat/completions\"]\nkind = \"chat\"\n"
         "sources = [\"sim\"]\n"
         "[prices.\"sim-chat\"]\ninput = 1000000\noutput = 1000000\n";
}

const std::string hi =
    R"({"model":"sim-chat","messages":[{"role":"user","content":"hi"}]})";

reply call(uint16_t port) {
  return exchange_with(port, http::verb::post, "/v1/chat/completions", hi,
                       {{"Authorization", std::string{"Bearer "} + team_key}});
}

std::string code_of(const reply& r) {
  auto doc = r.doc();
  if (!doc.is_object() || !doc.contains("error") ||
      !doc["error"]["code"].is_string())
    return "";
  return doc["error"]["code"].get<std::string>();
}

shared_limit limit_of(const std::string& name, shared_limit::kind k,
                      uint64_t size, duration period = 60s) {
  shared_limit l;
  l.name = name;
  l.type = k;
  l.limit = size;
  l.period = period;
  return l;
}

struct tally {
  std::atomic<int> ok{0}, refused{0}, other{0};
};

// Nine clients, three per node, `calls` calls each; counts the answers
// (`refusal`: the code of a refusal by the limit) while sampling the
// reservations in flight in `probe_limit` (the most seen returned).
uint64_t load(const std::vector<const node_process*>& nodes, int calls,
              const std::string& refusal, tally& t, shared_limits& probe,
              const shared_limit& probe_limit) {
  std::vector<std::thread> clients;
  std::atomic<bool> done{false};
  for (int c = 0; c < 9; ++c)
    clients.emplace_back([&, c] {
      for (int k = 0; k < calls; ++k) {
        auto r = call(nodes[c % nodes.size()]->port());
        if (r.status == 200)
          ++t.ok;
        else if (r.status == 429 && code_of(r) == refusal)
          ++t.refused;
        else
          ++t.other;
      }
    });
  uint64_t most = 0;
  std::thread joiner{[&] {
    for (auto& c : clients)
      c.join();
    done = true;
  }};
  while (!done) {
    if (auto n = probe.read(probe_limit))
      most = std::max(most, n->in_flight);
    std::this_thread::sleep_for(10ms);
  }
  joiner.join();
  return most;
}

} // namespace

TEST_CASE("node: three sluice-node processes hold a key's tokens per minute "
          "together through Redis",
          "[node][redis][spend]") {
  test_redis redis;
  auto path = write_config(
      "spend-tpm",
      cluster_config(redis, "tpm-test:", "tokens_per_minute = 180", 200));
  node_process n0{path}, n1{path}, n2{path};
  redis_client probe_client{redis.config("tpm-test:")};
  shared_limits probe{probe_client, 10s, "probe"};
  auto tpm =
      limit_of("key:team:tokens_per_minute", shared_limit::kind::window, 180);
  tally t;
  // 36 calls of 18 reserved / 11 used against 180 a minute: counted by
  // each node alone, 16 per node would pass (48 in all).
  auto most = load({&n0, &n1, &n2}, 4, "rate_limit_exceeded", t, probe, tpm);
  INFO("ok " << t.ok << ", refused " << t.refused << ", other " << t.other
             << ", most reserved in flight " << most);
  CHECK(t.ok + t.refused + t.other == 36);
  CHECK(t.other == 0);
  // Granted only while used + in flight + 18 fit 180: 11 x ok <= 180.
  CHECK(t.ok * 11 <= 180);
  CHECK(t.ok >= 10); // ten reservations fit at once
  CHECK(most <= 180);
  CHECK(most >= 18); // the sampling saw calls in flight
  auto counts = probe.read(tpm);
  REQUIRE(counts);
  CHECK(counts->used == static_cast<uint64_t>(t.ok) * 11);
  CHECK(counts->in_flight == 0); // every reservation was settled
  int reserves = 0;
  for (auto* n : {&n0, &n1, &n2}) {
    auto st =
        exchange_with(n->port(), http::verb::get, "/status", "",
                      {{"Authorization", std::string{"Bearer "} + admin_key}});
    REQUIRE(st.status == 200);
    // Every node shows the cluster's count, read from Redis.
    auto team = st.doc()["spend"]["keys"]["team"];
    CHECK(team["counted_in"] == "redis");
    CHECK(team["tokens_per_minute"]["used"] == t.ok * 11);
    CHECK(team["tokens_in_flight"] == 0);
    auto shared = st.doc()["spend"]["shared"];
    CHECK(shared["held_here"] == 0);
    CHECK(shared["errors"] == 0);
    reserves += shared["reserves"].get<int>();
  }
  CHECK(reserves == 36);
  std::remove(path.c_str());
}

TEST_CASE("node: three sluice-node processes hold a key's daily budget "
          "together through Redis",
          "[node][redis][spend]") {
  test_redis redis;
  auto path = write_config(
      "spend-budget",
      cluster_config(redis, "budget-test:", "budget_usd_per_day = 100", 200));
  node_process n0{path}, n1{path}, n2{path};
  redis_client probe_client{redis.config("budget-test:")};
  shared_limits probe{probe_client, 10s, "probe"};
  constexpr uint64_t dollar = 100'000'000;
  auto daily = limit_of("key:team:budget_usd_per_day", shared_limit::kind::day,
                        100 * dollar);
  tally t;
  auto most = load({&n0, &n1, &n2}, 3, "insufficient_quota", t, probe, daily);
  INFO("ok " << t.ok << ", refused " << t.refused << ", other " << t.other
             << ", most reserved in flight $" << most / dollar);
  CHECK(t.ok + t.refused + t.other == 27);
  CHECK(t.other == 0);
  // Each call reserves $18 and spends $11: the budget is never passed.
  CHECK(t.ok * 11 <= 100);
  CHECK(t.ok >= 5); // five reservations fit at once
  CHECK(t.refused >= 1);
  auto counts = probe.read(daily);
  REQUIRE(counts);
  CHECK(counts->used == static_cast<uint64_t>(t.ok) * 11 * dollar);
  CHECK(counts->used <= 100 * dollar);
  CHECK(counts->in_flight == 0);
  std::remove(path.c_str());
}

TEST_CASE("node: kill -9 a node with calls in flight - their token "
          "reservations are renewed while it lives and lapse within one "
          "TTL after",
          "[node][redis][spend]") {
  test_redis redis;
  auto path = write_config(
      "spend-kill",
      cluster_config(redis, "kill-spend:", "tokens_per_minute = 1000", 4000,
                     "spend_reservation_ttl_s = 1\n"));
  node_process a{path}, b{path};
  redis_client probe_client{redis.config("kill-spend:")};
  shared_limits probe{probe_client, 10s, "probe"};
  auto tpm =
      limit_of("key:team:tokens_per_minute", shared_limit::kind::window, 1000);
  std::vector<std::thread> holders;
  for (int i = 0; i < 3; ++i)
    holders.emplace_back([&] { call(a.port()); });
  auto in_flight = [&] {
    auto n = probe.read(tpm);
    return n ? n->in_flight : uint64_t{999'999};
  };
  REQUIRE(eventually([&] { return in_flight() == 54; }));
  // Past two TTLs the calls still run: their reservations were renewed.
  std::this_thread::sleep_for(2200ms);
  CHECK(in_flight() == 54);
  a.signal(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  REQUIRE(eventually([&] { return in_flight() == 0; }, 5s));
  auto lapsed_after = std::chrono::steady_clock::now() - killed;
  INFO("lapsed " << std::chrono::duration<double>(lapsed_after).count()
                 << " s after the kill");
  CHECK(lapsed_after < 1500ms); // one TTL (1 s), plus polling and slack
  for (auto& h : holders)
    h.join();
  // Node B has the whole limit again.
  auto r = call(b.port());
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-remaining-tokens") == "982");
  b.signal(SIGTERM);
  std::remove(path.c_str());
}

TEST_CASE("node: Redis down - calls under a spend limit are refused 503, or "
          "with spend_when_down = \"open\" counted by the node alone",
          "[node][redis][spend]") {
  test_redis redis;
  auto closed_path = write_config(
      "spend-closed",
      cluster_config(redis, "down-test:", "tokens_per_minute = 20", 0));
  auto open_path =
      write_config("spend-open",
                   cluster_config(redis, "down-test:", "tokens_per_minute = 20",
                                  0, "spend_when_down = \"open\"\n"));
  node_process closed{closed_path}, open{open_path};
  REQUIRE(call(closed.port()).status == 200);
  REQUIRE(eventually([&] {
    return call(open.port()).status == 429; // 11 used + 18 > 20, shared
  }));
  redis.stop();
  auto refused = call(closed.port());
  CHECK(refused.status == 503);
  CHECK(code_of(refused) == "governance_backend_error");
  CHECK_THAT(refused.body, Catch::Contains("spend_when_down"));
  CHECK_FALSE(refused.retry_after.empty());
  // Open: the node counts alone, from nothing: one call of 18 fits 20.
  auto alone = call(open.port());
  CHECK(alone.status == 200);
  CHECK(call(open.port()).status == 429);
  closed.signal(SIGTERM);
  open.signal(SIGTERM);
  std::remove(closed_path.c_str());
  std::remove(open_path.c_str());
}
