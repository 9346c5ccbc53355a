// Config reload at the node (SPEC's reload rules, issue 17): POST
// /admin/reload under load adds, changes and removes a route and a source
// with no failed call and no leaked permit; a bad file is refused with
// 422 config_rejected and the node serves on; client keys are swapped,
// a kept key keeps its counters.

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
