#pragma once

// The process's own gauges in Prometheus text (the names client libraries
// use: `process_resident_memory_bytes`, `process_open_fds`, ...), read from
// /proc/self and getrlimit. Linux only: elsewhere every read fails and the
// text is empty.

#include <cstdint>
#include <optional>
#include <string>

namespace sluice {
class prom_text;
} // namespace sluice

namespace sluice::node {

/// What was read of the process; a figure that could not be read is unset.
struct process_figures {
  /// Resident set size (/proc/self/statm, pages times the page size).
  std::optional<uint64_t> resident_memory_bytes;
  /// Entries of /proc/self/fd, the directory's own descriptor not counted.
  std::optional<uint64_t> open_fds;
  /// The soft RLIMIT_NOFILE.
  std::optional<uint64_t> max_fds;
  /// `Threads:` of /proc/self/status.
  std::optional<uint64_t> threads;
  /// Start of the process in seconds since the Unix epoch: its start in
  /// clock ticks after boot (/proc/self/stat) plus `btime` (/proc/stat).
  std::optional<double> start_time_seconds;
};

/// Reads the figures now; a read that fails leaves its figure unset.
process_figures read_process_figures() noexcept;

/// Writes the set figures to `out`, each a gauge with its `# HELP` and
/// `# TYPE` lines; unset ones are left out. Never throws: out of memory,
/// the text is left as it was.
void write_process_metrics(prom_text& out,
                           const process_figures& figures) noexcept;

/// The set figures as Prometheus text (`write_process_metrics` on its own).
/// Empty if nothing is set (or memory runs out).
std::string process_metrics_text(const process_figures& figures) noexcept;

/// `process_metrics_text(read_process_figures())`: for `GET /metrics`.
std::string process_metrics_text() noexcept;

} // namespace sluice::node
