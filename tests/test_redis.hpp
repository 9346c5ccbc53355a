#pragma once

// A redis-server of the test's own on a free loopback port, stopped (and
// restartable) at will. Persistence is off; nothing outside the test sees
// it.

#include <cstdint>
#include <string>

#include <sys/types.h>

#include "sluice/runtime/redis/client.hpp"

namespace sluice::testing {

class test_redis {
public:
  /// Starts the server and waits until it answers PING (throws if it does
  /// not within a few seconds).
  test_redis();
  ~test_redis();

  test_redis(const test_redis&) = delete;
  test_redis& operator=(const test_redis&) = delete;

  uint16_t port() const noexcept { return port_; }

  /// A client config for this server, with short timeouts.
  redis_config config(const std::string& prefix = "test:") const;

  /// Kills the server (SIGKILL: like a crash) and waits for it to exit.
  void stop();

  /// Starts it again on the same port (empty: nothing was persisted).
  void start();

  /// Freezes the server (SIGSTOP): connections stay open and new ones are
  /// still accepted by the kernel, but nothing answers -- a hung host.
  void freeze();

  /// Lets a frozen server go on (SIGCONT).
  void thaw();

  bool running() const noexcept { return pid_ > 0; }

private:
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

} // namespace sluice::testing
