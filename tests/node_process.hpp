#pragma once

// A sluice-node process of the built binary on a free loopback port (its
// stdout read for the port), for tests that run several nodes with real
// signals; and the config files they read.

#include <csignal>
#include <fstream>
#include <string>

#include <unistd.h>

#include "child_process.hpp"
#include "loopback_http.hpp"

namespace sluice::testing {

class node_process {
public:
  explicit node_process(const std::string& config_path)
      : child_{{SLUICE_NODE_BINARY, "--config", config_path, "--listen",
                "127.0.0.1:0"}}
      , port_{child_.listening_port()} {}

  uint16_t port() const { return port_; }

  pid_t pid() const { return child_.pid(); }

  // Its /status document (null if unreadable).
  loopback::json status() const {
    auto r = loopback::exchange(port_, loopback::http::verb::get, "/status");
    auto doc = r.doc();
    if (r.status != 200 || !doc.is_object())
      return nullptr;
    return doc;
  }

  // This node's cluster leases, per its /status (-1 if unreadable).
  int held() const {
    auto doc = status();
    if (doc.is_null())
      return -1;
    return doc["tiers"]["cluster"]["held_here"].get<int>();
  }

  // The state of `source`'s breaker, per its /status ("" if unreadable).
  std::string breaker(const std::string& source) const {
    auto doc = status();
    if (doc.is_null())
      return "";
    for (auto& s : doc["sources"])
      if (s.value("name", "") == source)
        return s["breaker"].value("state", "");
    return "";
  }

  // Sends `sig` and waits for the exit.
  void signal(int sig) {
    child_.signal(sig);
    child_.wait_status();
  }

private:
  child_process child_;
  uint16_t port_ = 0;
};

// Writes a node config to a file of its own (removed by the caller);
// returns its path.
inline std::string write_config(const std::string& name,
                                const std::string& text) {
  auto path = std::string{"/tmp/sluice-"} + name + "-" +
              std::to_string(getpid()) + ".toml";
  std::ofstream{path} << text;
  return path;
}

} // namespace sluice::testing
