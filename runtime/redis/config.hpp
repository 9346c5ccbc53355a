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
  /// The connection's name in `CLIENT LIST` (sent with `CLIENT SETNAME`
  /// after each connect); empty: unnamed. See `for_role`.
  std::string client_name;
};

/// `cfg` for one of this process's connections: named
/// `sluice-<pid>-<role>`, so that an operator (or a test) can tell which
/// process and which part holds each connection in `CLIENT LIST`.
redis_config for_role(redis_config cfg, const std::string& role);

/// Throws `std::invalid_argument` naming the field of nonsense settings.
void validate(const redis_config& cfg);

} // namespace sluice
