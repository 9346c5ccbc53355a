// sluice-node: the Sluice runtime as an OpenAI-compatible HTTP gateway.
// Thin: parse flags (CLI11), load the config, run the HTTP front until SIGINT
// or SIGTERM, drain in-flight calls for the grace period, exit 0.

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <fmt/core.h>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/config_reload.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/remote_source.hpp"
#include "sluice/runtime/runtime.hpp"

namespace {

/// A bad command line (an unknown flag, a missing or bad value) and a bad
/// config both exit 2: either way the node was not started as asked.
constexpr int exit_usage = 2;
constexpr int exit_bad_config = 2;

/// `sluice-node VERSION`, VERSION the CMake project's (a compile
/// definition, examples/CMakeLists.txt).
constexpr const char* version_line = "sluice-node " SLUICE_VERSION;

const char* description =
    R"(Runs the Sluice gateway. Without --config it runs on an embedded default
config with simulated upstreams, so it works on a fresh machine.)";

const char* exit_codes =
    R"(exit codes: 0 stopped by SIGINT/SIGTERM (or --help, --version, a valid
--check-config), 1 a failure at start, 2 a bad command line or config.)";

/// What the command line asks for.
struct node_flags {
  std::string config_path;
  /// `--listen`, already parsed (the flag's check refuses a bad one).
  std::optional<sluice::host_port> listen;
  bool print_default_config = false;
  std::string check_config;
};

/// How long the startup check waits for each breaker and gate to answer.
constexpr auto startup_check_timeout = std::chrono::seconds{5};

// Prints a config error the way a user can act on it; returns exit code 2.
int report(const std::string& origin, const sluice::config_error& e) {
  std::cerr << "sluice-node: invalid config " << origin << ": " << e.what()
            << "\n";
  return exit_bad_config;
}

// Sets the CAF scheduler from the node settings. (Remote sources need no
// CAF network layer: their transport is runtime/remote_link.hpp.)
void configure_actors(caf::actor_system_config& caf_cfg,
                      const sluice::file_config& cfg) {
  auto& node = cfg.node;
  sluice::add_error_category(caf_cfg);
  if (node.scheduler == "loops") {
    auto loops = node.loops != 0
                     ? node.loops
                     : std::max(1u, std::thread::hardware_concurrency());
    sluice::use_loop_scheduler(caf_cfg, loops);
    return;
  }
  caf_cfg.set("scheduler.policy", caf::atom_from_string(node.scheduler));
  auto workers = node.actor_threads != 0
                     ? node.actor_threads
                     : std::max(1u, std::thread::hardware_concurrency() / 2);
  caf_cfg.set("scheduler.max-threads", static_cast<size_t>(workers));
}

// The runtime of `cfg`, its sources and routes installed, and every actor
// it spawned seen alive (`runtime::check_started`).
std::unique_ptr<sluice::runtime> build_runtime(caf::actor_system& sys,
                                               const sluice::file_config& cfg) {
  auto rt = std::make_unique<sluice::runtime>(sys, cfg.runtime);
  sluice::install(*rt, cfg);
  rt->check_started(startup_check_timeout);
  return rt;
}

// --check-config: a dry run. Applies the start's rules that need no
// network (sluice::check_front_settings) and builds everything the start
// builds (the runtime and its sources, in a throwaway actor system) but
// binds no listener and connects to nothing: a remote source loads its
// certificates and stays unconnected (a black-holed address must not hang
// the check). A config that passes here does not fail at start -- unless
// a port is taken when it starts.
void apply_listen_flag(sluice::file_config& cfg,
                       const std::optional<sluice::host_port>& listen) {
  if (!listen)
    return;
  cfg.node.listen_host = listen->host;
  cfg.node.listen_port = listen->port;
  cfg.node.key_lines.erase("listen"); // a flag has no line
}

int check_config(const std::string& path,
                 const std::optional<sluice::host_port>& listen) {
  try {
    auto cfg = sluice::load_config_file(path);
    apply_listen_flag(cfg, listen); // checked as the start would run it
    sluice::check_front_settings(cfg.node);
    for (auto& s : cfg.sources)
      s.remote.connect = false;
    // Checked as read; a check starts no tool server (no child, no session).
    cfg.mcp.servers.clear();
    cfg.mcp.settings.clear();
    caf::actor_system_config caf_cfg;
    configure_actors(caf_cfg, cfg);
    caf::actor_system sys{caf_cfg};
    build_runtime(sys, cfg).reset();
    sys.await_actors_before_shutdown(false);
  } catch (const sluice::config_error& e) {
    return report(path, e);
  } catch (const std::exception& e) {
    std::cerr << "sluice-node: invalid config " << path << ": " << e.what()
              << "\n";
    return exit_bad_config;
  }
  std::cout << "sluice-node: " << path << " is valid\n";
  return 0;
}

// Whether the node listens on a loopback address (where the operations
// endpoints, the dashboard with them, are served without a key).
bool is_loopback(const std::string& host) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(host, ec);
  return host == "localhost" || (!ec && a.is_loopback());
}

// HOST:PORT for printing (IPv6 in brackets).
std::string printable(const std::string& host, uint16_t port) {
  return sluice::to_string(sluice::host_port{host, port});
}

} // namespace

int main(int argc, char** argv) {
  // A peer closing a socket mid-write must cost that connection, not the
  // process (Asio reports EPIPE on the operation instead).
  std::signal(SIGPIPE, SIG_IGN);
  node_flags flags;
  CLI::App app{description, "sluice-node"};
  app.footer(exit_codes);
  app.set_help_flag("-h,--help", "show this text and exit");
  app.set_version_flag("--version", version_line, "print the version and exit");
  app.add_option("--config", flags.config_path,
                 "run with the TOML config in FILE")
      ->type_name("FILE");
  app.add_option("--listen", "listen here instead of the config's node.listen")
      ->type_name("HOST:PORT")
      ->check(
          [&flags](const std::string& text) -> std::string {
            try {
              flags.listen = sluice::parse_host_port(text);
              return {};
            } catch (const std::invalid_argument& e) {
              return std::string{e.what()} + " (HOST:PORT or [V6]:PORT)";
            }
          },
          "");
  app.add_flag("--print-default-config", flags.print_default_config,
               "print the embedded default config and exit");
  auto check = app.add_option("--check-config", flags.check_config,
                              "check FILE and exit (0: valid, 2: invalid)")
                   ->type_name("FILE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) // --help, --version: printed on stdout
      return app.exit(e);
    // CLI11's message names the flag ("--listen: ...", "The following
    // argument was not expected: --x").
    std::cerr << "sluice-node: " << e.what()
              << "\nRun with --help for the options.\n";
    return exit_usage;
  }
  if (flags.print_default_config) {
    std::cout << sluice::default_config_text();
    return 0;
  }
  if (check->count() > 0)
    return check_config(flags.check_config, flags.listen);
  const auto& config_path = flags.config_path;

  sluice::file_config cfg;
  auto origin = config_path.empty() ? std::string{"(default)"} : config_path;
  try {
    cfg = config_path.empty()
              ? sluice::parse_config(sluice::default_config_text(), "(default)")
              : sluice::load_config_file(config_path);
    apply_listen_flag(cfg, flags.listen);
    // Before anything is built: as --check-config refuses it.
    sluice::check_front_settings(cfg.node);
  } catch (const sluice::config_error& e) {
    return report(origin, e);
  }

  // Signals are taken on main's own io_context, before any other thread
  // exists: SIGINT/SIGTERM drain; SIGHUP reloads the config file (on this
  // thread, never an event loop's); SIGUSR1 reopens the access log file
  // (log rotation); SIGUSR2 is logged; none of these kills the node.
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals{signals_io, SIGINT, SIGTERM};
  signals.add(SIGHUP);
  signals.add(SIGUSR1);
  signals.add(SIGUSR2);
  int stop_signal = 0;
  sluice::config_reloader* reloader = nullptr; // once the node runs
  sluice::http_front* running_front = nullptr; // once the node runs
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec)
          return;
        if (sig == SIGINT || sig == SIGTERM) {
          stop_signal = sig;
          signals_io.stop();
          return;
        }
        try {
          if (sig == SIGHUP && reloader != nullptr)
            reloader->reload("SIGHUP"); // logs what it did or why not
          else if (sig == SIGUSR1 && running_front != nullptr)
            running_front->reopen_access_log(); // logs what it did
          else
            sluice::logger().info("signal {} received; ignored", sig);
        } catch (...) { // nothing escapes the handler
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  caf::actor_system_config caf_cfg;
  configure_actors(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  try {
    auto rt = build_runtime(sys, cfg);
    // Declared before the front, which must not outlive it.
    sluice::config_reloader config_reload{*rt, cfg, config_path};
    sluice::http_front front{*rt, cfg.node};
    front.serve_reloads(config_reload);
    reloader = &config_reload;
    running_front = &front;
    auto address = printable(cfg.node.listen_host, front.port());
    auto* loops = sluice::loop_scheduler::of(sys);
    fmt::print("sluice-node listening on http://{} ({} config; {})\n", address,
               config_path.empty() ? "default" : config_path,
               loops != nullptr
                   ? std::to_string(loops->loops()) + " event loop(s)"
                   : "CAF's " + cfg.node.scheduler + " scheduler");
    if (front.admin_port() != 0)
      fmt::print("sluice-node operations (/status, /metrics, /events, "
                 "/admin/) on http://{}\n",
                 printable(cfg.node.admin_listen->host, front.admin_port()));
    if (!cfg.node.auth.keys.empty())
      fmt::print("{} client key(s): calls need Authorization: Bearer KEY\n",
                 cfg.node.auth.keys.size());
    fmt::print(
        "try:\n  curl -s http://{}/v1/chat/completions -H "
        "'Content-Type: application/json' -H 'X-Session-Id: demo'{} "
        "-d '{{\"model\":\"sim-chat\",\"messages\":[{{\"role\":"
        "\"user\",\"content\":\"hi\"}}]}}'\n",
        address,
        cfg.node.auth.keys.empty() ? "" : " -H \"Authorization: Bearer $KEY\"");
    // Where an operator watches it (the rule of /status applies).
    if (front.admin_port() != 0)
      fmt::print("dashboard: http://{}/dashboard\n",
                 printable(cfg.node.admin_listen->host, front.admin_port()));
    else if (cfg.node.auth.admin_digest)
      fmt::print("dashboard: http://{}/dashboard (user: any; password: the "
                 "admin key)\n",
                 address);
    else if (cfg.node.auth.keys.empty() && is_loopback(cfg.node.listen_host))
      fmt::print("dashboard: http://{}/dashboard\n", address);
    std::fflush(stdout);
    signals_io.run();
    reloader = nullptr;
    running_front = nullptr;
    fmt::print("sluice-node: {}: stopping; letting {} call(s) finish\n",
               stop_signal == SIGINT ? "SIGINT" : "SIGTERM", front.in_flight());
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
