#pragma once

// The node's listeners: binding them and the one accept loop every one of
// them runs -- the main listener and `node.admin_listen`, which share a
// strand and one back-off, or one listener per loop (`node.accept =
// "reuseport"`) -- with the connection caps at each accept.

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice::node {

struct front_state;

/// Pause before accepting again after the process ran out of descriptors
/// (accepting at once again would spin: the pending connection stays in
/// the backlog and the next accept fails the same way).
constexpr auto accept_backoff_time = std::chrono::milliseconds{100};

/// Binds the main listener on `host:port` (with a listener per loop, one
/// per loop on the same port). Throws `std::runtime_error` saying why it
/// cannot listen.
void bind_main(front_state& f, const std::string& host, uint16_t port);

/// Binds `node.admin_listen` on `host:port` (throws as `bind_main`).
void bind_admin(front_state& f, const std::string& host, uint16_t port);

/// Starts every bound listener's accept loop (each on its strand or loop).
void start_accepting(front_state& f);

/// Closes the per-loop listeners, each on its loop.
void close_loop_listeners(front_state& f);

} // namespace sluice::node
