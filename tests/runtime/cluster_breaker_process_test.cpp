// Shared breakers and cluster waiters across sluice-node processes (the
// built binary, one Redis, an upstream that counts arrivals):
// - A's failures open the breaker on B and C within 1 s, and exactly one
//   probe reaches the recovering upstream while all three wait;
// - the probing node killed with -9: another node probes within one open
//   period of the first probe;
// - B's subscription killed (CLIENT KILL) while A's breaker opens: B
//   catches up within 1 s of subscribing again;
// - a full cluster with waiting nodes: the Redis commands per second they
//   cost, and the time from a release on one node to an admission on
//   another (printed; the figures are in bench/RESULTS.md).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "loopback_http.hpp"
#include "node_process.hpp"
#include "sluice/runtime/redis/client.hpp"
#include "test_redis.hpp"
#include "test_upstream.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::node_process;
using sluice::testing::test_redis;
using sluice::testing::test_upstream;
using sluice::testing::write_config;
using namespace sluice::testing::loopback;

namespace {

using clock_type = std::chrono::steady_clock;

// Three nodes on one Redis, one http source "up" with a quick breaker
// (4 failures open it for `open_s`), one attempt per call.
std::string breaker_config(const test_redis& redis, const test_upstream& up,
                           const std::string& prefix, int open_s,
                           int reconnect_after_ms = 800) {
  return "[admission]\nwait_timeout_s = 2\n"
         "[backend]\ntype = \"redis\"\naddress = \"127.0.0.1:" +
         std::to_string(redis.port()) + "\"\nkey_prefix = \"" + prefix +
         "\"\nreconnect_after_ms = " + std::to_string(reconnect_after_ms) +
         "\n"
         "[kinds.chat]\nmax_attempts = 1\nstall_window_s = 1\n"
         "[sources.up]\ntype = \"http\"\nbase_url = \"" +
         up.url("/ok") +
         "\"\n  [sources.up.breaker]\n  window_size = 4\n  min_samples = 4\n"
         "  open_duration_s = " +
         std::to_string(open_s) +
         "\n[routes.\"/v1/chat/completions\"]\nsources = [\"up\"]\n";
}

void call(const node_process& n) {
  exchange(n.port(), http::verb::post, "/v1/chat/completions", "{}");
}

// Opens the breaker of node `n` with its own failures.
void open_on(const node_process& n, test_upstream& up) {
  up.failing = true;
  for (int i = 0; i < 4; ++i)
    call(n);
  up.failing = false;
}

// Clients that keep calling every node until stopped.
class traffic {
public:
  explicit traffic(const std::vector<const node_process*>& nodes) {
    for (auto* n : nodes)
      threads_.emplace_back([this, n] {
        while (!stop_) {
          call(*n);
          std::this_thread::sleep_for(20ms);
        }
      });
  }

  ~traffic() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Arrivals at the upstream from `from` on.
std::vector<clock_type::time_point>
arrivals_since(const test_upstream& up, clock_type::time_point from) {
  std::vector<clock_type::time_point> out;
  for (auto t : up.arrivals())
    if (t >= from)
      out.push_back(t);
  return out;
}

uint64_t relay_stat(const node_process& n, const char* field) {
  auto doc = n.status();
  if (doc.is_null() || !doc["breaker_relay"].is_object())
    return 0;
  return doc["breaker_relay"].value(field, uint64_t{0});
}

// Redis's own count of the commands it ran so far.
int64_t commands_processed(redis_client& c) {
  auto r = c.command({"INFO", "stats"});
  if (!r.ok())
    return -1;
  auto& text = r.reply->text;
  auto at = text.find("total_commands_processed:");
  if (at == std::string::npos)
    return -1;
  return std::stoll(text.substr(at + 25));
}

// Redis's count of each command it ran so far (INFO commandstats).
std::map<std::string, int64_t> command_counts(redis_client& c) {
  std::map<std::string, int64_t> out;
  auto r = c.command({"INFO", "commandstats"});
  if (!r.ok())
    return out;
  auto& text = r.reply->text;
  size_t pos = 0;
  while ((pos = text.find("cmdstat_", pos)) != std::string::npos) {
    auto colon = text.find(':', pos);
    auto calls = text.find("calls=", colon);
    if (colon == std::string::npos || calls == std::string::npos)
      break;
    out[text.substr(pos + 8, colon - pos - 8)] =
        std::stoll(text.substr(calls + 6));
    pos = calls;
  }
  return out;
}

// Kills the connections of process `pid` named `...-<role>` (for_role).
int kill_connections(redis_client& c, pid_t pid, const std::string& role) {
  auto list = c.command({"CLIENT", "LIST"});
  REQUIRE(list.ok());
  auto name = "name=sluice-" + std::to_string(pid) + "-" + role + " ";
  int killed = 0;
  size_t pos = 0;
  auto& text = list.reply->text;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    auto line = text.substr(pos, end - pos) + " ";
    pos = end + 1;
    if (line.find(name) == std::string::npos)
      continue;
    auto id = line.substr(3, line.find(' ') - 3); // "id=N ..."
    if (c.command({"CLIENT", "KILL", "ID", id}).ok())
      ++killed;
  }
  return killed;
}

} // namespace

TEST_CASE("node: A's failures open the breaker on B and C within 1 s, and "
          "exactly one probe reaches the recovering upstream",
          "[node][redis]") {
  test_upstream up;
  test_redis redis;
  // Open for 4 s; the probe takes 3 s (within its lease).
  auto path = write_config("probe", breaker_config(redis, up, "probe:", 4));
  node_process a{path}, b{path}, c{path};
  std::vector<const node_process*> all{&a, &b, &c};
  open_on(a, up);
  // The breaker may hear the last outcome just after the call's answer.
  REQUIRE(eventually([&] { return a.breaker("up") == "open"; }));
  auto opened = clock_type::now();
  CHECK(eventually(
      [&] { return b.breaker("up") == "open" && c.breaker("up") == "open"; },
      1000ms));
  CHECK(clock_type::now() - opened < 1s);
  // Recovered, but slow to answer (3 s): any second probe would arrive
  // while the first is out.
  up.hanging = true;
  auto recovering = clock_type::now();
  {
    traffic t{all};
    REQUIRE(eventually([&] { return !arrivals_since(up, recovering).empty(); },
                       5000ms));
    auto first = arrivals_since(up, recovering).front();
    std::this_thread::sleep_for(2500ms);
    auto seen = arrivals_since(up, recovering);
    INFO("arrivals within 2.5 s of the first probe: " << seen.size());
    CHECK(seen.size() == 1);
    CHECK(first - recovering >= 1s); // none before the open period ended
    up.hanging = false;
    // The probe's success closes the breaker everywhere.
    CHECK(eventually(
        [&] {
          return a.breaker("up") == "closed" && b.breaker("up") == "closed" &&
                 c.breaker("up") == "closed";
        },
        4000ms));
  }
  uint64_t claimed = 0;
  for (auto* n : all)
    claimed += relay_stat(*n, "probes_claimed");
  CHECK(claimed >= 1);
  std::remove(path.c_str());
}

TEST_CASE("node: the probing node killed with -9 - another node probes "
          "within one open period",
          "[node][redis]") {
  test_upstream up;
  test_redis redis;
  auto path = write_config("probekill", breaker_config(redis, up, "pk:", 2));
  node_process a{path}, b{path}, c{path};
  std::vector<node_process*> all{&a, &b, &c};
  open_on(a, up);
  REQUIRE(eventually(
      [&] { return b.breaker("up") == "open" && c.breaker("up") == "open"; },
      1000ms));
  up.hanging = true; // the probe hangs (3 s, past its 2 s lease)
  auto recovering = clock_type::now();
  std::vector<std::unique_ptr<traffic>> load;
  for (auto* n : all)
    load.push_back(
        std::make_unique<traffic>(std::vector<const node_process*>{n}));
  REQUIRE(eventually([&] { return !arrivals_since(up, recovering).empty(); },
                     8000ms));
  auto first = arrivals_since(up, recovering).front();
  size_t prober = all.size();
  REQUIRE(eventually(
      [&] {
        for (size_t i = 0; i < all.size(); ++i)
          if (all[i]->breaker("up") == "half_open")
            prober = i;
        return prober < all.size();
      },
      1000ms));
  all[prober]->signal(SIGKILL);
  load[prober]->stop();
  // Its lease lapses one open period (2 s) after it was taken.
  REQUIRE(eventually([&] { return arrivals_since(up, recovering).size() >= 2; },
                     5000ms));
  auto second = arrivals_since(up, recovering)[1];
  INFO("second probe " << std::chrono::duration_cast<std::chrono::milliseconds>(
                              second - first)
                              .count()
                       << " ms after the first");
  CHECK(second - first <= 2s + 500ms);
  CHECK(second - first >= 1500ms); // not before the lease's end
  up.hanging = false;
  load.clear();
  std::remove(path.c_str());
}

TEST_CASE("node: B cut off from Redis while A's breaker opens catches up "
          "within 1 s of subscribing again",
          "[node][redis]") {
  test_upstream up;
  test_redis redis;
  // B subscribes again 2 s after its subscription is killed: A's opening
  // is published well before.
  auto path =
      write_config("catchup", breaker_config(redis, up, "cu:", 30, 2000));
  node_process a{path}, b{path};
  redis_client admin{redis.config()};
  REQUIRE(eventually([&] { return relay_stat(b, "resyncs") >= 1; }));
  auto resyncs = relay_stat(b, "resyncs");
  // B's subscription goes; it subscribes again after reconnect_after
  // (2 s), and A's breaker opens meanwhile: B misses the message.
  REQUIRE(kill_connections(admin, b.pid(), "breakers-sub") == 1);
  open_on(a, up);
  // The breaker may hear the last outcome just after the call's answer.
  REQUIRE(eventually([&] { return a.breaker("up") == "open"; }));
  CHECK(b.breaker("up") == "closed");
  REQUIRE(
      eventually([&] { return relay_stat(b, "resyncs") > resyncs; }, 3000ms));
  auto resubscribed = clock_type::now();
  CHECK(eventually([&] { return b.breaker("up") == "open"; }, 1000ms));
  CHECK(clock_type::now() - resubscribed < 1s);
  std::remove(path.c_str());
}

TEST_CASE("node: waiters on a full cluster are woken by a release on "
          "another node, not by polling Redis",
          "[node][redis]") {
  test_upstream up;
  test_redis redis;
  auto path = write_config(
      "waiters",
      "[admission]\nwait_timeout_s = 8\n"
      "[backend]\ntype = \"redis\"\naddress = \"127.0.0.1:" +
          std::to_string(redis.port()) +
          "\"\nkey_prefix = \"w:\"\ncluster_global_cap = 1\nlease_ttl_s = 9\n"
          "[sources.up]\ntype = \"http\"\nbase_url = \"" +
          up.url("/ok") +
          "\"\n[routes.\"/v1/chat/completions\"]\nsources = [\"up\"]\n");
  node_process a{path}, b{path}, c{path};
  // A holds the cluster's one permit for 3 s (the upstream hangs).
  up.hanging = true;
  std::thread holder{[&] { call(a); }};
  REQUIRE(eventually([&] { return up.arrivals().size() == 1; }));
  auto held_at = up.arrivals().front();
  up.hanging = false;
  // B and C wait for it.
  std::thread wb{[&] { call(b); }}, wc{[&] { call(c); }};
  REQUIRE(eventually([&] {
    auto sb = b.status(), sc = c.status();
    return !sb.is_null() && !sc.is_null() &&
           sb["tiers"]["cluster"]["waiting_here"] == 1 &&
           sc["tiers"]["cluster"]["waiting_here"] == 1;
  }));
  redis_client admin{redis.config()};
  auto k0 = command_counts(admin);
  auto c0 = commands_processed(admin);
  auto t0 = clock_type::now();
  std::this_thread::sleep_for(1500ms);
  auto c1 = commands_processed(admin);
  auto k1 = command_counts(admin);
  for (auto& [name, n] : k1)
    if (n - k0[name] > 0 && name != "info")
      std::printf("  %s: %lld\n", name.c_str(),
                  static_cast<long long>(n - k0[name]));
  double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  // Less the INFO itself; A renews its lease every 3 s (lease_ttl / 3).
  double per_s = (c1 - c0 - 1) / secs;
  double scripts = (k1["evalsha"] - k0["evalsha"]) / secs;
  std::printf("cluster full, 2 nodes waiting: %.1f Redis commands/s, %.1f "
              "scripts/s\n",
              per_s, scripts);
  // 20 ms polling was 50 scripts/s per waiting node.
  CHECK(scripts < 2 * 3.0);
  CHECK(per_s < 2 * 15.0);
  holder.join();          // A's call ends at 3 s: its lease goes back
  REQUIRE(eventually([&] { return up.arrivals().size() >= 2; }, 3000ms));
  auto admitted = up.arrivals()[1];
  auto released = held_at + 3s;
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(admitted - released)
          .count();
  std::printf("release on A -> admission on B or C: %lld ms\n",
              static_cast<long long>(ms));
  wb.join();
  wc.join();
  uint64_t woken = 0;
  for (auto* n : {&b, &c}) {
    auto s = n->status();
    woken += s["tiers"]["cluster"]["woken"].get<uint64_t>();
  }
  CHECK(woken >= 1); // notices heard (only notices count)
  CHECK(ms < 300);   // the safety poll is 1 s; the notice comes first
  std::remove(path.c_str());
}
