#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/policy/time.hpp"

struct redisContext;
struct timeval;

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

/// A duration as hiredis wants its timeouts.
timeval to_timeval(duration d);

/// A fresh random name for this node in what it writes to Redis (lease
/// ids, pub/sub messages): never the same across restarts.
std::string random_node_id();

/// One answer from Redis, flattened: what the scripts here return.
struct redis_reply {
  enum class kind : uint8_t { nil, integer, string, array, status };
  kind type = kind::nil;
  int64_t integer = 0;
  /// For string and status answers.
  std::string text;
  std::vector<redis_reply> elements;
};

/// A blocking Redis connection with timeouts (hiredis). Not thread-safe:
/// one owner at a time -- in Sluice, one detached backend actor.
///
/// Any failure (refused, timed out, a protocol or server error) returns an
/// error text and drops the connection; the next command reconnects, but
/// not before `reconnect_after` has passed since a failed connect.
class redis_client {
public:
  explicit redis_client(redis_config cfg);
  ~redis_client();

  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  struct result {
    std::optional<redis_reply> reply;
    /// Set when there is no reply: why.
    std::string error;

    bool ok() const noexcept { return reply.has_value(); }
  };

  /// Runs one command, e.g. `{"SET", key, value}`.
  result command(const std::vector<std::string>& argv);

  /// Runs a Lua script by its SHA1 (`EVALSHA`), loading it first if the
  /// server does not know it (after a restart, `NOSCRIPT`).
  result eval(const std::string& script, const std::vector<std::string>& keys,
              const std::vector<std::string>& args);

  /// The key with the configured prefix.
  std::string key(const std::string& name) const {
    return cfg_.key_prefix + name;
  }

  bool connected() const noexcept { return ctx_ != nullptr; }

  const redis_config& config() const noexcept { return cfg_; }

private:
  bool ensure_connected(std::string& error);
  void drop();
  result run(const std::vector<std::string>& argv);

  redis_config cfg_;
  redisContext* ctx_ = nullptr;
  std::optional<steady::time_point> connect_failed_at_;
  /// Scripts by text: their SHA1 once loaded.
  std::vector<std::pair<std::string, std::string>> shas_;
};

} // namespace sluice
