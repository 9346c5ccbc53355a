#include "sluice/runtime/node/fd_limit.hpp"

#include <algorithm>

#include <dirent.h>
#include <sys/resource.h>

#include "sluice/actors/log.hpp"

namespace sluice::node {

uint64_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  auto want = std::min<uint64_t>(rl.rlim_max, max_fd_limit);
  if (rl.rlim_cur < want) {
    auto before = rl.rlim_cur;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
      logger().info("file descriptor limit raised from {} to {}", before, want);
    else
      getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

fd_usage current_fd_usage() {
  fd_usage u;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    u.limit = rl.rlim_cur;
  // Counting needs no descriptor of its own beyond the directory's.
  if (auto dir = opendir("/proc/self/fd")) {
    while (auto e = readdir(dir))
      if (e->d_name[0] != '.')
        ++u.open;
    closedir(dir);
    if (u.open > 0)
      --u.open; // the directory itself
  }
  return u;
}

} // namespace sluice::node
