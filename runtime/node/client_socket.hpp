#pragma once

// What a readable client socket holds, peeked without consuming anything:
// how a connection notices its client leaving while it is not reading (a
// call in flight, an /events stream).

#include <boost/asio/ip/tcp.hpp>

namespace sluice::node {

/// A wakeup for readability is not proof of either `closed` or `has_data`:
/// Asio may report a socket readable from readiness it saw earlier, with
/// nothing there now (`quiet`).
enum class client_state { closed, has_data, quiet };

/// Peeks one byte without blocking.
client_state peek_client(boost::asio::ip::tcp::socket& socket);

} // namespace sluice::node
