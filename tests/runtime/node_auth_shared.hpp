// Client keys and the admin key, the shared part: the keys, the keyed
// config, the Authorization header.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "sluice/runtime/config_error.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::node_under_test;
using namespace sluice::testing::loopback;

namespace node_auth_test_support {

constexpr const char* key_a = "key-a-0123456789abcdef";
constexpr const char* key_b = "key-b-0123456789abcdef";
constexpr const char* admin = "admin-0123456789abcdef";

inline void set_keys() {
  ::setenv("SLUICE_TEST_KEY_A", key_a, 1);
  ::setenv("SLUICE_TEST_KEY_B", key_b, 1);
  ::setenv("SLUICE_TEST_ADMIN", admin, 1);
}

// Two simulated sources: `fast` answers at once; `slow` takes 1.5 s (to
// hold permits while two 0.2 s admission waits run out). Key a may use sim-*
// models only, holds one call at a time and makes 3 requests a minute; key b
// holds two, in sub-sessions of one each (session_cap).
inline std::string keyed_config(const std::string& extra = "") {
  set_keys();
  return R"toml(
[node]
access_log = "off"

[admission]
session_cap = 1
wait_timeout_s = 0.2

[auth]
admin_key = "env:SLUICE_TEST_ADMIN"
  [auth.keys.team-a]
  key = "env:SLUICE_TEST_KEY_A"
  models = ["sim-*"]
  max_concurrent = 1
  requests_per_minute = 3
  [auth.keys.team-b]
  key = "env:SLUICE_TEST_KEY_B"
  max_concurrent = 2

[sources.fast]
type = "simulated"
  [[sources.fast.phases]]
  latency_min_ms = 0
  latency_max_ms = 0

[sources.slow]
type = "simulated"
  [[sources.slow.phases]]
  latency_min_ms = 1500
  latency_max_ms = 1500

[kinds.chat]                # a route with no source left fails in 0.5 s
stall_window_s = 0.5
poll_interval_s = 0.1

[routes."/v1/chat/completions"]
kind = "chat"
sources = ["fast"]
  [routes."/v1/chat/completions".models]
  "sim-chat" = ["fast"]
  "gpt-4o" = ["fast"]

[routes."/slow"]
kind = "chat"
sources = ["slow"]
)toml" + extra;
}

inline header_list bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}};
}

inline const std::string chat = R"({"model":"sim-chat","messages":[]})";

inline std::string code_of(const reply& r) {
  auto doc = r.doc();
  if (!doc.is_object() || !doc.contains("error"))
    return "";
  return doc["error"]["code"].get<std::string>();
}

} // namespace node_auth_test_support
