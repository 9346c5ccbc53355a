#pragma once

// Sources in other processes. A team writes its own source actor
// (messages/source.hpp) in its own program and serves it on a port
// (`remote_source_server`); a node uses it as `type = "remote"`
// (`spawn_remote_source`).
//
// The transport is ours, not CAF's middleman (ARCHITECTURE.md, "Remote
// sources"): mutual TLS on an Asio loop of each side's own
// (runtime/remote_link.hpp), carrying five kinds of frames
// (runtime/remote_wire.hpp) -- attempt, reply, stream chunk, cancel,
// heartbeat. Only a peer with a certificate by the configured CA gets past
// the handshake; a frame's announced length is checked against
// `remote_wire::max_remote_frame_bytes` before anything is allocated; no
// frame can name or end an actor.
//
// The served side stays a CAF actor system: each attempt is asked of the
// team's source by a requester actor of its own, terminated when the node
// withdraws the attempt (or its connection goes) -- the source sees its
// requester go, the same contract as in one process. A streamed answer's
// chunks go to that requester and cross under the attempt's tag (the
// governor's handle never crosses).

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// Registers Sluice's message types on `cfg`. Remote sources no longer
/// need CAF's network layer (their transport is runtime/remote_link.hpp);
/// kept so that programs written for it still build.
void enable_remote_sources(caf::actor_system_config& cfg);

/// The longest answer body a remote source may send (whole, or streamed in
/// all); a longer one fails the attempt `transient`. Its frame is refused
/// before allocation past `remote_wire::max_remote_frame_bytes`.
constexpr size_t max_remote_body_bytes = size_t{64} << 20;

/// The most attempts one served source runs at once (all connections);
/// more are answered `transient` (a node that floods it must not exhaust
/// its process).
constexpr size_t max_host_attempts = 10000;

/// The most connections a served source holds at once (handshaking or
/// up); more are closed at accept. Each costs a TLS session and a 16 KiB
/// read buffer before its handshake.
constexpr size_t max_remote_connections = 64;

/// How long a connection to a served source has to complete its TLS
/// handshake (a peer that connects and says nothing is dropped).
constexpr duration remote_handshake_timeout = std::chrono::seconds{5};

/// The certificates of one side (PEM files). Both sides need all three: the
/// CA that signs the *other* side's certificate, and their own certificate
/// (chain) and unencrypted key. Use a CA of its own for remote sources:
/// every certificate it signs may call (or serve) the source.
struct remote_tls_config {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  /// Node side only: the name the served side's certificate must carry
  /// (empty: the address's host; an IP address is matched against the
  /// certificate's IP entries).
  std::string server_name;
};

/// Serves `source` on `host:port` (port 0: any free one) for nodes to use
/// as `type = "remote"`, over mutual TLS: only a node presenting a
/// certificate by `tls.ca_file` is served. The listener runs on an Asio
/// loop of its own; the destructor closes it and every connection and
/// terminates the attempts in flight (destroy this before the actor
/// system). Throws `std::invalid_argument` ("FIELD: problem") for a
/// certificate file it cannot use and `std::runtime_error` if it cannot
/// listen.
class remote_source_server {
public:
  remote_source_server(caf::actor_system& sys, source_actor source,
                       uint16_t port, const remote_tls_config& tls,
                       const std::string& host = "127.0.0.1");
  ~remote_source_server();

  remote_source_server(const remote_source_server&) = delete;
  remote_source_server& operator=(const remote_source_server&) = delete;

  /// The port it listens on.
  uint16_t port() const noexcept;

  /// Attempts in flight now (requesters alive).
  size_t in_flight() const;

  /// What the listener saw (tests, logs).
  struct counters {
    std::atomic<uint64_t> accepted{0};
    /// Handshakes that failed: no certificate, one by another CA, not TLS.
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> authenticated{0};
    /// Connections closed for a frame past the limit or malformed.
    std::atomic<uint64_t> bad_frames{0};
    std::atomic<uint64_t> attempts{0};
  };
  const counters& stats() const noexcept;

  struct impl;

private:
  std::shared_ptr<impl> impl_;
};

/// Whether a remote source can serve now, and if not why (shared between
/// its connector and the runtime's /healthz and /status). Thread-safe.
class remote_link_health {
public:
  /// Empty while connected; else why not ("connecting", "lost: ...").
  std::optional<std::string> problem() const {
    std::lock_guard<std::mutex> guard{mx_};
    return problem_;
  }

  void set(std::optional<std::string> problem) {
    std::lock_guard<std::mutex> guard{mx_};
    problem_ = std::move(problem);
  }

private:
  mutable std::mutex mx_;
  std::optional<std::string> problem_{"not connected yet"};
};

/// Where a node finds a remote source, how it proves who it is, and how
/// it reconnects.
struct remote_source_config {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  /// The node's certificates: `ca_file` signs the served side's.
  remote_tls_config tls;
  /// Longest wait for a connection to be set up (resolve, TCP connect and
  /// TLS handshake together).
  duration connect_timeout = std::chrono::seconds{2};
  /// Reconnects back off from `reconnect_min`, doubling up to
  /// `reconnect_max`.
  duration reconnect_min = std::chrono::milliseconds{100};
  duration reconnect_max = std::chrono::seconds{5};
  /// false: a dry run (`sluice-node --check-config`): the certificates are
  /// loaded, nothing connects, every attempt fails `transient`.
  bool connect = true;
};

/// Throws `std::invalid_argument` naming the field of nonsense settings
/// (`tls.ca_file` ... for certificate files that are missing or unusable).
void validate(const remote_source_config& cfg);

/// Spawns the node's side of a remote source: a source actor (not
/// self-timed: the runtime times its attempts) whose connection runs on an
/// Asio loop of its own: it connects without blocking anything else
/// (`connect_timeout` bounds each try), and reconnects with backoff.
/// - While not connected, an attempt fails `transient` at once.
/// - When the link drops (the served process died, a reset, 5 s of
///   silence), every attempt in flight fails `transient` at once (the
///   breaker counts them).
/// - When an attempt's requester terminates (the call was cancelled or
///   timed out), the served side is told to withdraw it.
/// `health`, if given, gets the link's state (`runtime` shows it).
source_actor
spawn_remote_source(caf::actor_system& sys, remote_source_config cfg,
                    std::shared_ptr<remote_link_health> health = nullptr);

} // namespace sluice
