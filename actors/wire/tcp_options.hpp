#pragma once

// The socket option every TCP connection of a call gets (SPEC §11): no
// write waits for an ACK. Without TCP_NODELAY, Nagle's algorithm holds a
// small write while an earlier segment is unacknowledged, and the peer's
// delayed ACK makes that wait ~40 ms: the last event of every stream, and
// a small answer after its header, came out that late.

#include <boost/asio/ip/tcp.hpp>

namespace sluice {

/// Sets TCP_NODELAY on a connected (or accepted) socket. A failure (a
/// socket already closed by its peer) is ignored: the next read or write
/// reports it.
inline void set_no_delay(boost::asio::ip::tcp::socket& socket) noexcept {
  boost::system::error_code ignored;
  socket.set_option(boost::asio::ip::tcp::no_delay(true), ignored);
}

} // namespace sluice
