#pragma once

// The TCP sockets open in this process, read from /proc/self/fd, with what
// the kernel says of each: for tests that check the options a node in the
// test process set on its connections, and how many segments it sent.
// (A file of its own: <linux/tcp.h>, which has the full `tcp_info`, clashes
// with <netinet/tcp.h>, which Asio includes.)

#include <cstdint>
#include <vector>

namespace sluice::testing {

struct tcp_socket_facts {
  int fd = -1;
  uint16_t local_port = 0;
  uint16_t peer_port = 0;
  bool no_delay = false;
  /// Segments with data sent so far (`tcpi_data_segs_out`).
  uint32_t data_segments_out = 0;
};

/// Every connected IPv4 TCP socket of this process.
std::vector<tcp_socket_facts> tcp_sockets();

} // namespace sluice::testing
