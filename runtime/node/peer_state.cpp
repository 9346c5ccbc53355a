#include "sluice/runtime/node/peer_state.hpp"

#include <cerrno>

#include <sys/socket.h>

namespace sluice::node {

peer_state peek_peer(boost::asio::ip::tcp::socket& socket) {
  char byte;
  auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0)
    return peer_state::has_data;
  if (n == 0)
    return peer_state::closed; // orderly shutdown
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    return peer_state::quiet;
  return peer_state::closed; // reset or another error
}

} // namespace sluice::node
