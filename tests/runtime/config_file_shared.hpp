// The config file tests' shared part: the minimal config and the refusal
// helper.

#pragma once

#include "sluice/runtime/config_file.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "fakes/tls_upstream.hpp"
#include "log_capture.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/runtime.hpp"
#include "virtual_time.hpp"

using namespace std::chrono_literals;
using namespace sluice;

namespace config_file_test_support {

inline const char* minimal = R"toml(
[sources.a]
type = "simulated"

[routes."/v1/chat/completions"]
sources = ["a"]
)toml";

// The config_error for `text`, or nullopt if it parses.
inline std::optional<config_error> refusal(const std::string& text) {
  try {
    parse_config(text);
  } catch (const config_error& e) {
    return e;
  }
  return std::nullopt;
}

} // namespace config_file_test_support
