#include "socket_probe.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace sluice::testing {

std::vector<tcp_socket_facts> tcp_sockets() {
  std::vector<tcp_socket_facts> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr)
    return out;
  while (auto* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir))
      continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode))
      continue;
    sockaddr_in local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local),
                    &ll) != 0 ||
        local.sin_family != AF_INET ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer),
                    &pl) != 0)
      continue; // not IPv4, or not connected (a listener)
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
        type != SOCK_STREAM)
      continue;
    tcp_socket_facts f;
    f.fd = static_cast<int>(fd);
    f.local_port = ntohs(local.sin_port);
    f.peer_port = ntohs(peer.sin_port);
    int on = 0;
    socklen_t ol = sizeof on;
    f.no_delay = getsockopt(f.fd, IPPROTO_TCP, TCP_NODELAY, &on, &ol) == 0 &&
                 on != 0;
    tcp_info info{};
    socklen_t il = sizeof info;
    if (getsockopt(f.fd, IPPROTO_TCP, TCP_INFO, &info, &il) == 0)
      f.data_segments_out = info.tcpi_data_segs_out;
    out.push_back(f);
  }
  closedir(dir);
  return out;
}

} // namespace sluice::testing
