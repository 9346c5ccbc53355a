#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "sluice/runtime/config/file_config.hpp"
#include "sluice/runtime/fwd.hpp"

namespace sluice {

/// The HTTP front of `sluice-node` (Boost.Beast): OpenAI-compatible routes
/// in front of the runtime, plus `GET /healthz`.
///
/// - Every configured route path takes `POST` with a JSON object body; the
///   body is the call's payload. The session is `X-Session-Id`, or, when the
///   header is absent, one session per TCP connection. Each TCP connection
///   owns a connection tier.
/// - A client that disconnects while its call is in flight cancels the call:
///   its governor is terminated and everything it held comes back.
/// - Errors are JSON `{"error": {"message", "type", "param", "code",
///   "sluice_code", ...}}` (OpenAI's shape; runtime/node/responses.hpp) with
///   the status of `messages/errors.hpp` (`Retry-After` on 503s).
/// The start's rules for `settings` that need no network
/// (runtime/node/start_rules.hpp): a listener off loopback needs keys or
/// `auth.allow_anonymous` (when its address says; a host name is checked
/// once bound), `node.admin_listen` not on the main listener's port, an
/// access log file that can be opened. `config_error` naming the key. The
/// front applies them before it binds or opens anything; `sluice-node
/// --check-config` applies them too.
void check_front_settings(const node_settings& settings);

class http_front {
public:
  /// Applies `check_front_settings` (a `config_error` before anything is
  /// opened or bound), binds `settings.listen_host:listen_port` (port 0:
  /// any free port), and `settings.admin_listen` if set, and starts
  /// accepting on `threads` I/O threads. Throws `std::runtime_error`
  /// naming `node.listen` or `node.admin_listen` if it cannot bind, and
  /// `config_error` (key "auth") for a listener bound off loopback with
  /// neither client keys nor `auth.allow_anonymous`.
  http_front(runtime& rt, const node_settings& settings, size_t threads = 2);

  ~http_front();

  http_front(const http_front&) = delete;
  http_front& operator=(const http_front&) = delete;

  /// Serves config reloads through `reloader` (which must outlive the
  /// front): `POST /admin/reload` (an operations endpoint) and /status
  /// `config`. Each reload is checked by the front's rule for listeners
  /// (off loopback, keys or `auth.allow_anonymous`) and, once applied,
  /// swaps the client keys (a key whose settings are unchanged keeps its
  /// calls in flight, rate and counters) and publishes the new sources'
  /// breakers on /events. The rest of `[node]` needs a restart.
  void serve_reloads(config_reloader& reloader);

  /// The port actually bound.
  uint16_t port() const noexcept;

  /// The port of `node.admin_listen` (0: none).
  uint16_t admin_port() const noexcept;

  /// Calls in flight right now.
  size_t in_flight() const noexcept;

  /// Connections open now (both listeners), and of those the ones waiting
  /// for a request (at its listener's cap, the oldest of them is closed to
  /// serve a new one).
  size_t open_connections() const noexcept;
  size_t idle_connections() const noexcept;

  /// Client connections served at once: `node.max_connections`, lowered
  /// to fit under the descriptor limit (`policy::connection_cap`).
  size_t connection_cap() const noexcept;

  /// Replaces the steady clock the front reads for its requests (a key's
  /// request rate, durations in the access log, /status ages): tests run
  /// them in virtual time. Call it before the first request.
  void use_clock(std::function<time_point()> now);

  /// SIGUSR1: the access log file is opened again by its path (after a
  /// rename, lines go to a new file). False if it could not be (the old
  /// file is kept).
  bool reopen_access_log() noexcept;

  /// Graceful stop: no new connections, then wait for in-flight calls up to
  /// `grace`, then close everything. Returns the calls still in flight when
  /// it gave up (0 if all finished).
  size_t shutdown(duration grace);

  /// Implementation detail (keeps Beast out of this header).
  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

} // namespace sluice
