#pragma once

// Sources in other processes, over CAF's network layer (libcaf_io's
// middleman). A team writes its own source actor (messages/source.hpp) in
// its own program and serves it on a port (`remote_source_server`); a node
// uses it as `type = "remote"` (`spawn_remote_source`).
//
// The wire: the node's connector sends `(remote_attempt_atom, tag,
// call_request)` to the served host actor, which asks the team's source
// from a requester actor of its own, one per attempt, and answers
// `(remote_reply_atom, tag, source_reply)`. `(cancel_atom, tag)` withdraws
// an attempt: the host terminates its requester, so the source sees its
// requester go -- the same contract as in one process. Streamed chunks go
// to the connector under a random tag (the governor's handle never crosses)
// and on to the governor.
//
// SECURITY: CAF's transport is neither authenticated nor encrypted. Anyone
// who reaches the port can send attempts to the source -- and any message
// to the actors it learns of, an exit included (the host, the node's
// connector; never a governor: streamed chunks come through the
// connector) -- and anyone on the path can read and alter them. Serve on
// loopback (the default) or a private network, and put a tunnel
// (WireGuard, an SSH forward, stunnel) around it when it must cross one you
// do not trust.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// Prepares `cfg` for sources in other processes, on both sides: loads
/// the middleman and registers Sluice's message types (which CAF 0.17 looks
/// up by name on the wire).
void enable_remote_sources(caf::actor_system_config& cfg);

/// The longest answer body a remote source may send (whole, or streamed in
/// all); a longer one fails the attempt `transient`. NOTE: CAF reads each
/// message whole (up to 4 GiB on its wire) before this is checked: the
/// bound is on what goes further, not on the node's memory.
constexpr size_t max_remote_body_bytes = size_t{64} << 20;

/// CAF's heartbeat on a connection to or from a remote source, and the
/// silence after which the connection is dropped (a link lost without a
/// reset: a partition, a host powered off).
constexpr duration remote_heartbeat = std::chrono::seconds{1};
constexpr duration remote_link_timeout = std::chrono::seconds{5};

/// Serves `source` on `host:port` (port 0: any free one) for nodes to use
/// as `type = "remote"`. The host actor it publishes is terminated by the
/// destructor; destroy this before the actor system (CAF's destructor waits
/// for published actors). Throws `std::runtime_error` if it cannot listen.
class remote_source_server {
public:
  remote_source_server(caf::actor_system& sys, source_actor source,
                       uint16_t port, const std::string& host = "127.0.0.1");
  ~remote_source_server();

  remote_source_server(const remote_source_server&) = delete;
  remote_source_server& operator=(const remote_source_server&) = delete;

  /// The port it listens on.
  uint16_t port() const noexcept { return port_; }

  /// Attempts in flight now (requesters alive).
  size_t in_flight() const;

  /// The host actor (tests).
  const caf::actor& host() const noexcept { return host_; }

private:
  caf::actor host_;
  uint16_t port_ = 0;
  std::shared_ptr<std::atomic<size_t>> in_flight_;
};

/// Where a node finds a remote source, and how it reconnects.
struct remote_source_config {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  /// Longest wait for a connection to be set up.
  duration connect_timeout = std::chrono::seconds{2};
  /// Reconnects back off from `reconnect_min`, doubling up to
  /// `reconnect_max`.
  duration reconnect_min = std::chrono::milliseconds{100};
  duration reconnect_max = std::chrono::seconds{5};
};

/// Throws `std::invalid_argument` naming the field of nonsense settings.
void validate(const remote_source_config& cfg);

/// Spawns the node's side of a remote source: a source actor (not
/// self-timed: the runtime times its attempts) that connects to the served
/// host without blocking, monitors it, and reconnects with backoff.
/// - While not connected, an attempt fails `transient` at once.
/// - When the host's process dies or the connection drops, every attempt
///   in flight fails `transient` at once (the breaker counts them).
/// - When an attempt's requester terminates (the call was cancelled or
///   timed out), the host is told to withdraw it.
/// Needs `enable_remote_sources` on the actor system's config.
source_actor spawn_remote_source(caf::actor_system& sys,
                                 remote_source_config cfg);

} // namespace sluice
