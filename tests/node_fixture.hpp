#pragma once

// A whole node in the test process, built from config TEXT through the
// config-file API (the path sluice-node takes) and listening on a free
// loopback port: what the in-process node tests share. Like sluice-node,
// it runs on the loop scheduler (two loops unless `node.loops` says) unless
// the config names CAF's own.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/config_reload.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"

namespace sluice::testing {

struct node_under_test {
  caf::actor_system_config caf_cfg;
  std::unique_ptr<caf::actor_system> sys;
  file_config cfg;
  std::unique_ptr<runtime> rt;
  /// Made by `serve_reloads`: between the runtime and the front.
  std::unique_ptr<config_reloader> reloader;
  std::unique_ptr<http_front> front;

  /// `adjust` may change the parsed config before the node starts (the
  /// listener is 127.0.0.1 on a free port unless it says otherwise).
  explicit node_under_test(const std::string& config_text,
                           const std::function<void(file_config&)>& adjust = {},
                           const std::string& origin = "test.toml") {
    add_error_category(caf_cfg);
    cfg = parse_config(config_text, origin);
    cfg.node.listen_host = "127.0.0.1";
    cfg.node.listen_port = 0;
    if (adjust)
      adjust(cfg);
    // As sluice-node: on event loops unless the config names CAF's own
    // scheduler (then with its default threads).
    if (cfg.node.scheduler == "loops")
      use_loop_scheduler(caf_cfg, cfg.node.loops != 0 ? cfg.node.loops : 2);
    sys = std::make_unique<caf::actor_system>(caf_cfg);
    rt = std::make_unique<runtime>(*sys, cfg.runtime);
    install(*rt, cfg);
    front = std::make_unique<http_front>(*rt, cfg.node);
  }

  ~node_under_test() {
    if (front)
      front->shutdown(std::chrono::seconds{1});
    front.reset();
    reloader.reset();
    rt.reset(); // the system then waits for every actor to end
  }

  uint16_t port() const { return front->port(); }

  /// Serves config reloads from the file at `path` (as sluice-node does).
  void serve_reloads(const std::string& path) {
    reloader = std::make_unique<config_reloader>(*rt, cfg, path);
    front->serve_reloads(*reloader);
  }
};

} // namespace sluice::testing
