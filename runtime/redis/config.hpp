#pragma once

#include <cstdint>
#include <string>

#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// Where and how to reach Redis (the backend several nodes share).
struct redis_config {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  /// The password itself (the config file names an environment variable
  /// that holds it); empty: no AUTH.
  std::string password;
  /// Prepended to every key, so several deployments can share a server.
  std::string key_prefix = "sluice:";
  duration connect_timeout = std::chrono::milliseconds{500};
  /// Longest wait for one command's answer.
  duration command_timeout = std::chrono::milliseconds{500};
  /// After a failed connect, commands fail at once for this long before
  /// the next attempt to connect (no reconnect storm while Redis is down).
  duration reconnect_after = std::chrono::milliseconds{500};
};

/// Throws `std::invalid_argument` naming the field of nonsense settings.
void validate(const redis_config& cfg);

} // namespace sluice
