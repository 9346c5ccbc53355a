// sluice-node: the Sluice runtime as an OpenAI-compatible HTTP gateway.
// Thin: parse flags, load the config, run the HTTP front until SIGINT or
// SIGTERM, drain in-flight calls for the grace period, exit 0.

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <fmt/core.h>

#include "messages/errors.hpp"
#include "runtime/config_error.hpp"
#include "runtime/config_file.hpp"
#include "runtime/http_front.hpp"

namespace {

constexpr int exit_usage = 64;
constexpr int exit_bad_config = 2;

const char* usage = R"(usage: sluice-node [options]

Runs the Sluice gateway. Without --config it runs on an embedded default
config with simulated upstreams, so it works on a fresh machine.

options:
  --config FILE            run with the TOML config in FILE
  --listen HOST:PORT       listen here instead of the config's node.listen
  --print-default-config   print the embedded default config and exit
  --check-config FILE      check FILE and exit (0: valid, 2: invalid)
  --help                   show this text
)";

volatile std::sig_atomic_t stop_requested = 0;

void on_signal(int) {
  stop_requested = 1;
}

// Prints a config error the way a user can act on it; returns exit code 2.
int report(const std::string& origin, const sluice::config_error& e) {
  std::cerr << "sluice-node: invalid config " << origin << ": " << e.what()
            << "\n";
  return exit_bad_config;
}

} // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::string listen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "sluice-node: " << flag << " needs a value\n" << usage;
        std::exit(exit_usage);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      return 0;
    } else if (arg == "--print-default-config") {
      std::cout << sluice::default_config_text();
      return 0;
    } else if (arg == "--check-config") {
      auto path = value("--check-config");
      try {
        sluice::load_config_file(path);
      } catch (const sluice::config_error& e) {
        return report(path, e);
      }
      std::cout << "sluice-node: " << path << " is valid\n";
      return 0;
    } else if (arg == "--config") {
      config_path = value("--config");
    } else if (arg == "--listen") {
      listen = value("--listen");
    } else {
      std::cerr << "sluice-node: unknown option '" << arg << "'\n" << usage;
      return exit_usage;
    }
  }

  sluice::file_config cfg;
  auto origin = config_path.empty() ? std::string{"(default)"} : config_path;
  try {
    cfg = config_path.empty()
              ? sluice::parse_config(sluice::default_config_text(), "(default)")
              : sluice::load_config_file(config_path);
    if (!listen.empty()) {
      auto colon = listen.rfind(':');
      if (colon == std::string::npos)
        throw sluice::config_error("--listen", "must be HOST:PORT");
      auto port = std::atoi(listen.c_str() + colon + 1);
      if (port < 0 || port > 65535)
        throw sluice::config_error("--listen", "port must be in [0, 65535]");
      cfg.node.listen_host = listen.substr(0, colon);
      cfg.node.listen_port = static_cast<uint16_t>(port);
    }
  } catch (const sluice::config_error& e) {
    return report(origin, e);
  }

  caf::actor_system_config caf_cfg;
  sluice::add_error_category(caf_cfg);
  caf_cfg.set("scheduler.policy", caf::atom_from_string(cfg.node.scheduler));
  auto workers = cfg.node.actor_threads != 0
                     ? cfg.node.actor_threads
                     : std::max(1u, std::thread::hardware_concurrency() / 2);
  caf_cfg.set("scheduler.max-threads", static_cast<size_t>(workers));
  caf::actor_system sys{caf_cfg};
  try {
    sluice::runtime rt{sys, cfg.runtime};
    sluice::install(rt, cfg);
    sluice::http_front front{rt, cfg.node};
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    auto address = cfg.node.listen_host + ":" + std::to_string(front.port());
    fmt::print("sluice-node listening on http://{} ({} config)\n", address,
               config_path.empty() ? "default" : config_path);
    fmt::print("try:\n  curl -s http://{}/v1/chat/completions -H "
               "'Content-Type: application/json' -H 'X-Session-Id: demo' "
               "-d '{{\"model\":\"sim\",\"messages\":[{{\"role\":\"user\","
               "\"content\":\"hi\"}}]}}'\n",
               address);
    std::fflush(stdout);
    while (stop_requested == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fmt::print("sluice-node: stopping; letting {} call(s) finish\n",
               front.in_flight());
    auto left = front.shutdown(cfg.node.shutdown_grace);
    fmt::print("sluice-node: stopped ({} call(s) cut off by the grace "
               "period)\n",
               left);
    std::fflush(stdout);
  } catch (const sluice::config_error& e) {
    return report(origin, e);
  } catch (const std::exception& e) {
    std::cerr << "sluice-node: " << e.what() << "\n";
    return 1;
  }
  sys.await_actors_before_shutdown(false);
  return 0;
}
