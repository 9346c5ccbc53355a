// Config reload at the node (SPEC's reload rules, issue 17): POST
// /admin/reload under load adds, changes and removes a route and a source
// with no failed call and no leaked permit; a bad file is refused with
// 422 config_rejected and the node serves on; client keys are swapped,
// a kept key keeps its counters.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "loopback_http.hpp"
#include "node_fixture.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using namespace sluice::testing::loopback;

namespace {

std::string sim(const std::string& name, int ms) {
  return "[sources." + name + "]\ntype = \"simulated\"\n[[sources." + name +
         ".phases]]\nlatency_min_ms = " + std::to_string(ms) +
         "\nlatency_max_ms = " + std::to_string(ms) + "\n";
}

struct config_file {
  std::string path = "/tmp/sluice-node-reload-" + std::to_string(getpid()) +
                     "-" + std::to_string(next++) + ".toml";
  static inline int next = 0;

  explicit config_file(const std::string& text) { write(text); }
  ~config_file() { std::remove(path.c_str()); }

  void write(const std::string& text) const {
    auto tmp = path + ".new";
    {
      std::ofstream out{tmp};
      out << text;
    }
    std::rename(tmp.c_str(), path.c_str()); // as an editor saves
  }
};

const std::string chat = "[routes.\"/v1/chat/completions\"]\n";

const std::string body = R"({"messages":[{"role":"user","content":"hi"}]})";

// Waits (bounded) until `done()`.
template <class F>
bool settles(F done) {
  for (int i = 0; i < 500; ++i) {
    if (done())
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

} // namespace

TEST_CASE("node reload: routes and sources change under load with no failed "
          "call, and a bad file is refused",
          "[node][reload]") {
  auto v1 = sim("a", 30) + sim("old", 30) + chat + "sources = [\"a\"]\n" +
            "[routes.\"/v1/legacy\"]\nsources = [\"old\"]\n";
  config_file file{v1};
  node_under_test node{v1};
  node.serve_reloads(file.path);
  auto port = node.port();
  auto status = [&] {
    return exchange(port, http::verb::get, "/status").doc();
  };
  REQUIRE(status()["config"]["generation"] == 1);
  // Load: four clients calling the chat route back to back, one the
  // legacy route (removed by the reload: its calls fail only once the
  // route is gone, with 404, never in flight).
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      while (!stop) {
        auto r = exchange(port, http::verb::post, "/v1/chat/completions", body,
                          "load-" + std::to_string(i));
        if (r.status == 200)
          ++ok;
        else {
          ++failed;
          UNSCOPED_INFO("status " << r.status << ": " << r.body);
        }
      }
    });
  std::atomic<int> legacy_ok{0};
  std::atomic<int> legacy_bad{0};
  std::thread legacy{[&] {
    while (!stop) {
      auto r = exchange(port, http::verb::post, "/v1/legacy", body, "legacy");
      if (r.status == 200)
        ++legacy_ok;
      else if (r.status != 404)
        ++legacy_bad;
      else
        std::this_thread::sleep_for(5ms);
    }
  }};
  std::this_thread::sleep_for(200ms);
  // a changes (slower), b comes, old and /v1/legacy go, the chat route
  // now spreads over a and b, and a new route appears.
  file.write(sim("a", 40) + sim("b", 30) + chat + "sources = [\"a\", \"b\"]\n" +
             "[routes.\"/v1/embeddings\"]\nkind = \"embeddings\"\n"
             "sources = [\"b\"]\n");
  auto r = exchange(port, http::verb::post, "/admin/reload");
  REQUIRE(r.status == 200);
  auto doc = r.doc();
  CHECK(doc["reloaded"] == true);
  CHECK(doc["generation"] == 2);
  CHECK(doc["sources"]["replaced"] == json{"a"});
  CHECK(doc["sources"]["added"] == json{"b"});
  CHECK(doc["sources"]["removed"] == json{"old"});
  CHECK(doc["routes"]["removed"] == json{"/v1/legacy"});
  CHECK(doc["routes"]["added"] == json{"/v1/embeddings"});
  CHECK(doc["routes"]["replaced"] == json{"/v1/chat/completions"});
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& c : clients)
    c.join();
  legacy.join();
  CHECK(failed == 0);
  CHECK(ok > 10);
  CHECK(legacy_ok > 0);
  CHECK(legacy_bad == 0);
  // The new route serves; the removed one is gone.
  CHECK(exchange(port, http::verb::post, "/v1/embeddings",
                 R"({"input":"x"})")
            .status == 200);
  CHECK(exchange(port, http::verb::post, "/v1/legacy", body).status == 404);
  // Drained: the retired sources stopped, no permit held anywhere.
  REQUIRE(settles([&] {
    return status()["config"]["draining_sources"].empty();
  }));
  auto st = status();
  CHECK(st["config"]["generation"] == 2);
  CHECK(st["tiers"]["global"]["in_use"] == 0);
  CHECK(st["calls_in_flight"] == 0);
  for (auto& s : node.rt->sources())
    CHECK(s.tier->load().in_use == 0);
  CHECK(node.rt->broken_sources().empty());

  // A bad file: refused with its key and line, the node serves on.
  file.write(sim("a", 40) + chat + "sources = [\"missing\"]\n");
  r = exchange(port, http::verb::post, "/admin/reload");
  CHECK(r.status == 422);
  doc = r.doc();
  CHECK(doc["error"]["code"] == "config_rejected");
  CHECK(doc["error"]["generation"] == 2);
  auto message = doc["error"]["message"].get<std::string>();
  CHECK(message.find("routes.\"/v1/chat/completions\".sources") !=
        std::string::npos);
  CHECK(message.find("line ") != std::string::npos);
  st = status();
  CHECK(st["config"]["generation"] == 2);
  CHECK(st["config"]["reloads_refused"] == 1);
  CHECK(st["config"]["last_refusal"] == message.substr(message.find(": ") + 2));
  CHECK(exchange(port, http::verb::post, "/v1/embeddings", R"({"input":"x"})")
            .status == 200);
  // Not a GET.
  CHECK(exchange(port, http::verb::get, "/admin/reload").status == 405);
}

TEST_CASE("node reload: client keys are swapped, a kept key keeps its "
          "counters",
          "[node][reload]") {
  ::setenv("SLUICE_TEST_RELOAD_A", "reload-key-a-0123456789", 1);
  ::setenv("SLUICE_TEST_RELOAD_B", "reload-key-b-0123456789", 1);
  ::setenv("SLUICE_TEST_RELOAD_ADMIN", "reload-admin-0123456789", 1);
  auto keys = [](bool with_b) {
    std::string out = "[auth]\nadmin_key = \"env:SLUICE_TEST_RELOAD_ADMIN\"\n"
                      "[auth.keys.a]\nkey = \"env:SLUICE_TEST_RELOAD_A\"\n";
    if (with_b)
      out += "[auth.keys.b]\nkey = \"env:SLUICE_TEST_RELOAD_B\"\n";
    return out;
  };
  auto rest = sim("s", 5) + chat + "sources = [\"s\"]\n";
  config_file file{keys(false) + rest};
  node_under_test node{keys(false) + rest};
  node.serve_reloads(file.path);
  auto port = node.port();
  auto call = [&](const std::string& key) {
    return exchange_with(port, http::verb::post, "/v1/chat/completions", body,
                         {{"Authorization", "Bearer " + key}})
        .status;
  };
  header_list admin{{"Authorization", "Bearer reload-admin-0123456789"}};
  auto status = [&] {
    return exchange_with(port, http::verb::get, "/status", "", admin).doc();
  };
  CHECK(call("reload-key-a-0123456789") == 200);
  CHECK(call("reload-key-a-0123456789") == 200);
  CHECK(call("reload-key-b-0123456789") == 401);
  file.write(keys(true) + rest);
  auto r = exchange_with(port, http::verb::post, "/admin/reload", "", admin);
  REQUIRE(r.status == 200);
  CHECK(call("reload-key-b-0123456789") == 200);
  CHECK(call("reload-key-a-0123456789") == 200);
  auto st = status();
  CHECK(st["tiers"]["keys"]["a"]["requests"] == 3); // counted on
  CHECK(st["tiers"]["keys"]["b"]["requests"] == 1);
  // Without the admin key the reload endpoint is closed like the others.
  CHECK(exchange(port, http::verb::post, "/admin/reload").status == 401);
}

TEST_CASE("node reload: a reload that would leave a public listener without "
          "keys is refused",
          "[node][reload]") {
  ::setenv("SLUICE_TEST_RELOAD_A", "reload-key-a-0123456789", 1);
  ::setenv("SLUICE_TEST_RELOAD_ADMIN", "reload-admin-0123456789", 1);
  auto rest = sim("s", 5) + chat + "sources = [\"s\"]\n";
  auto with_key = "[auth]\nadmin_key = \"env:SLUICE_TEST_RELOAD_ADMIN\"\n"
                  "[auth.keys.a]\nkey = \"env:SLUICE_TEST_RELOAD_A\"\n" +
                  rest;
  config_file file{with_key};
  node_under_test node{with_key,
                       [](file_config& c) { c.node.listen_host = "0.0.0.0"; }};
  node.serve_reloads(file.path);
  auto port = node.port();
  header_list admin{{"Authorization", "Bearer reload-admin-0123456789"}};
  file.write("[auth]\nadmin_key = \"env:SLUICE_TEST_RELOAD_ADMIN\"\n" + rest);
  auto r = exchange_with(port, http::verb::post, "/admin/reload", "", admin);
  CHECK(r.status == 422);
  auto message = r.doc()["error"]["message"].get<std::string>();
  CHECK(message.find("auth: ") != std::string::npos);
  // Still closed to anonymous callers, open to the key.
  CHECK(exchange(port, http::verb::post, "/v1/chat/completions", body).status ==
        401);
  CHECK(exchange_with(port, http::verb::post, "/v1/chat/completions", body,
                      {{"Authorization", "Bearer reload-key-a-0123456789"}})
            .status == 200);
}

namespace {

// Key alpha with `cap` calls at once (2.5 s each on /slow); over it a call
// waits 0.2 s and is refused tool_busy.
std::string capped_key(int cap) {
  ::setenv("SLUICE_TEST_RELOAD_ALPHA", "reload-key-alpha-0123456789", 1);
  ::setenv("SLUICE_TEST_RELOAD_ADMIN", "reload-admin-0123456789", 1);
  return "[admission]\nwait_timeout_s = 0.2\n"
         "[auth]\nadmin_key = \"env:SLUICE_TEST_RELOAD_ADMIN\"\n"
         "[auth.keys.alpha]\nkey = \"env:SLUICE_TEST_RELOAD_ALPHA\"\n"
         "max_concurrent = " +
         std::to_string(cap) + "\n" + sim("slow", 2500) +
         "[routes.\"/slow\"]\nsources = [\"slow\"]\n";
}

unsigned reload_as_admin(uint16_t port) {
  return exchange_with(port, http::verb::post, "/admin/reload", "",
                       {{"Authorization", "Bearer reload-admin-0123456789"}})
      .status;
}

// `n` calls of key alpha on /slow at once, each on a thread; their
// statuses once all are answered.
struct alpha_calls {
  std::vector<std::thread> threads;
  std::vector<unsigned> statuses;
  std::vector<std::string> codes;

  alpha_calls(uint16_t port, int n)
      : statuses(n)
      , codes(n) {
    for (int i = 0; i < n; ++i)
      threads.emplace_back([this, port, i] {
        auto r = exchange_with(
            port, http::verb::post, "/slow", body,
            {{"Authorization", "Bearer reload-key-alpha-0123456789"}});
        statuses[i] = r.status;
        auto doc = r.doc();
        if (doc.is_object() && doc.contains("error"))
          codes[i] = doc["error"]["code"].get<std::string>();
      });
  }
  void join() {
    for (auto& t : threads)
      t.join();
    threads.clear();
  }
  int count(unsigned status) const {
    return static_cast<int>(
        std::count(statuses.begin(), statuses.end(), status));
  }
  ~alpha_calls() { join(); }
};

// The most calls in flight at the source while `busy()` holds, sampled.
struct in_flight_peak {
  std::atomic<uint32_t> peak{0};
  std::atomic<bool> stop{false};
  std::thread sampler;

  explicit in_flight_peak(const source_handle& s)
      : sampler([this, tier = s.tier] {
        while (!stop) {
          auto n = tier->load().in_use;
          if (n > peak)
            peak = n;
          std::this_thread::sleep_for(2ms);
        }
      }) {}
  ~in_flight_peak() {
    stop = true;
    sampler.join();
  }
};

} // namespace

TEST_CASE("node reload: a key's raised cap counts the calls it had in "
          "flight",
          "[node][reload][keys]") {
  // Issue 30, finding 4: alpha at its cap 3, a reload raising it to 4, then
  // 4 more calls were all admitted: 7 in flight under a cap of 4.
  config_file file{capped_key(3)};
  node_under_test node{capped_key(3)};
  node.serve_reloads(file.path);
  auto port = node.port();
  auto slow = node.rt->source("slow");
  in_flight_peak peak{slow};
  alpha_calls first{port, 3};
  REQUIRE(settles([&] { return slow.tier->load().in_use == 3; }));
  file.write(capped_key(4));
  REQUIRE(reload_as_admin(port) == 200);
  alpha_calls more{port, 4};
  more.join();
  first.join();
  INFO("peak in flight " << peak.peak.load());
  CHECK(peak.peak.load() <= 4u);
  CHECK(first.count(200) == 3);
  CHECK(more.count(200) == 1); // the one permit the raise freed
  CHECK(more.count(503) == 3);
  CHECK(std::count(more.codes.begin(), more.codes.end(), "tool_busy") == 3);
  CHECK(slow.tier->load().in_use == 0);
}

TEST_CASE("node reload: a key's lowered cap admits nothing until its calls "
          "in flight are under it",
          "[node][reload][keys]") {
  config_file file{capped_key(3)};
  node_under_test node{capped_key(3)};
  node.serve_reloads(file.path);
  auto port = node.port();
  auto slow = node.rt->source("slow");
  in_flight_peak peak{slow};
  alpha_calls first{port, 3};
  REQUIRE(settles([&] { return slow.tier->load().in_use == 3; }));
  file.write(capped_key(2));
  REQUIRE(reload_as_admin(port) == 200);
  // 3 in flight under a cap of 2: a new call waits 0.2 s and is refused.
  alpha_calls over{port, 1};
  over.join();
  CHECK(over.count(503) == 1);
  CHECK(over.codes[0] == "tool_busy");
  CHECK(peak.peak.load() == 3u);
  first.join();
  CHECK(first.count(200) == 3);
  // Once they are done the new cap holds: 2 of 3 admitted.
  alpha_calls next{port, 3};
  next.join();
  CHECK(next.count(200) == 2);
  CHECK(next.count(503) == 1);
  CHECK(peak.peak.load() == 3u);
}
