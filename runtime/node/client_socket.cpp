#include "sluice/runtime/node/client_socket.hpp"

#include <cerrno>

#include <sys/socket.h>

namespace sluice::node {

client_state peek_client(boost::asio::ip::tcp::socket& socket) {
  char byte;
  auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0)
    return client_state::has_data;
  if (n == 0)
    return client_state::closed; // orderly shutdown
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    return client_state::quiet;
  return client_state::closed; // reset or another error
}

} // namespace sluice::node
