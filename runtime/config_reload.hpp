#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/runtime/config/file_config.hpp"
#include "sluice/runtime/fwd.hpp"
#include "sluice/runtime/policy/config_diff.hpp"

namespace sluice {

/// What one reload did.
struct reload_outcome {
  /// Applied; otherwise the running config is unchanged.
  bool ok = false;
  /// The config generation running now (1: the one the node started on).
  uint64_t generation = 0;
  /// Why it was refused: "KEY (line N): problem", as `--check-config` says.
  std::string error;
  /// Applied: what changed, and what of the MCP servers (added, replaced:
  /// started again, removed: ended once their calls did).
  policy::reload_diff diff;
  policy::named_diff mcp;
  /// Applied: the parts of the file that changed but wait for a restart
  /// (of "node", "admission", "backend", "seed").
  std::vector<std::string> restart_needed;
};

/// A reload's summary for /status.
struct reload_status {
  uint64_t generation = 1;
  /// Where the config is read from (empty: the embedded default, which a
  /// reload cannot re-read).
  std::string path;
  /// Unix seconds when the running generation was loaded.
  int64_t loaded_unix = 0;
  /// Reloads refused since the start, and the last one's reason.
  uint64_t failed = 0;
  std::string last_error;
  int64_t last_error_unix = 0;
};

/// Config reload without a restart (SIGHUP, `POST /admin/reload`): reads
/// and checks the file again and applies it to the runtime with
/// `runtime::update`, or, on any error, keeps running the config it has
/// and says why. One reload at a time; any thread but an event loop's (it
/// reads a file and spawns the new sources).
class config_reloader {
public:
  /// `running`: the config the runtime was built from; `path`: its file
  /// (empty: the embedded default).
  config_reloader(runtime& rt, file_config running, std::string path);

  config_reloader(const config_reloader&) = delete;
  config_reloader& operator=(const config_reloader&) = delete;

  /// Runs before anything is applied; throws `config_error` to refuse the
  /// new config (the HTTP front refuses a reload that would leave a
  /// non-loopback listener without keys).
  void add_check(const void* owner,
                 std::function<void(const file_config&)> check);

  /// Runs after the runtime took the new config, with it (the front swaps
  /// its client keys). Must not throw (what it throws is logged).
  void on_applied(const void* owner,
                  std::function<void(const file_config&)> listener);

  /// Drops the checks and listeners of `owner` (before it goes away).
  void forget(const void* owner);

  /// Reads the file and applies it. `trigger` names what asked ("SIGHUP",
  /// "POST /admin/reload") in the log line.
  reload_outcome reload(const std::string& trigger);

  /// Applies `next` (already parsed) as a reload would.
  reload_outcome apply(file_config next, const std::string& trigger);

  reload_status status() const;

private:
  reload_outcome apply_locked(file_config next, const std::string& trigger);

  reload_outcome refused(const std::string& trigger, std::string error);

  runtime& rt_;
  std::string path_;
  /// One reload at a time, from reading the file to the end; guards
  /// `running_`, the checks and the listeners.
  std::mutex mx_;
  file_config running_;
  /// Guards `status_` alone: /status reads it during a reload.
  mutable std::mutex status_mx_;
  reload_status status_;
  using hook = std::pair<const void*, std::function<void(const file_config&)>>;
  std::vector<hook> checks_;
  std::vector<hook> listeners_;
};

} // namespace sluice
