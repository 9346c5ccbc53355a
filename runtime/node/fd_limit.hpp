#pragma once

// File descriptors: the node raises its soft limit to the hard one at start
// (a gateway's connections are descriptors), and reports both figures.

#include <cstdint>

namespace sluice::node {

struct fd_usage {
  /// The soft RLIMIT_NOFILE.
  uint64_t limit = 0;
  /// Descriptors open now (entries of /proc/self/fd; 0 if unreadable).
  uint64_t open = 0;
};

/// Raises the soft RLIMIT_NOFILE to the hard limit (at most
/// `max_fd_limit`). Returns the soft limit in force afterwards.
uint64_t raise_fd_limit();

/// Largest soft limit `raise_fd_limit` sets (a hard limit of "unlimited"
/// must not make select-sized tables or loops absurd).
constexpr uint64_t max_fd_limit = 1 << 20;

fd_usage current_fd_usage();

} // namespace sluice::node
