#include "sluice/runtime/node/process_metrics.hpp"

#include <fstream>
#include <sstream>
#include <string_view>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/core.h>

#include "sluice/runtime/node/metrics.hpp"

namespace sluice::node {

namespace {

// The whole of a (small) /proc file; nullopt if it cannot be read.
std::optional<std::string> slurp(const char* path) {
  std::ifstream in{path};
  if (!in)
    return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad())
    return std::nullopt;
  return out.str();
}

std::optional<uint64_t> resident_bytes() {
  auto text = slurp("/proc/self/statm");
  if (!text)
    return std::nullopt;
  std::istringstream in{*text};
  uint64_t size = 0;
  uint64_t resident = 0;
  auto page = sysconf(_SC_PAGESIZE);
  if (!(in >> size >> resident) || page <= 0)
    return std::nullopt;
  return resident * static_cast<uint64_t>(page);
}

std::optional<uint64_t> open_fds() {
  auto dir = opendir("/proc/self/fd");
  if (!dir)
    return std::nullopt;
  uint64_t n = 0;
  while (auto e = readdir(dir))
    if (e->d_name[0] != '.')
      ++n;
  closedir(dir);
  if (n == 0)
    return std::nullopt; // not even the directory's own: not a real count
  return n - 1;          // the directory itself
}

std::optional<uint64_t> max_fds() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return std::nullopt;
  return static_cast<uint64_t>(rl.rlim_cur);
}

std::optional<uint64_t> threads() {
  auto text = slurp("/proc/self/status");
  if (!text)
    return std::nullopt;
  std::istringstream in{*text};
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, 8, "Threads:") != 0)
      continue;
    std::istringstream value{line.substr(8)};
    uint64_t n = 0;
    if (value >> n && n > 0)
      return n;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> start_time_seconds() {
  // Field 22 of /proc/self/stat, counted after the command name, which is
  // in parentheses and may itself hold spaces and ')'.
  auto stat = slurp("/proc/self/stat");
  auto boot = slurp("/proc/stat");
  auto ticks_per_s = sysconf(_SC_CLK_TCK);
  if (!stat || !boot || ticks_per_s <= 0)
    return std::nullopt;
  auto close = stat->rfind(')');
  if (close == std::string::npos)
    return std::nullopt;
  std::istringstream fields{stat->substr(close + 1)};
  std::string field;
  for (int i = 3; i < 22; ++i) // fields 3 (state) .. 21
    if (!(fields >> field))
      return std::nullopt;
  uint64_t start_ticks = 0;
  if (!(fields >> start_ticks))
    return std::nullopt;
  std::istringstream lines{*boot};
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, 6, "btime ") != 0)
      continue;
    std::istringstream value{line.substr(6)};
    uint64_t btime = 0;
    if (!(value >> btime) || btime == 0)
      return std::nullopt;
    return static_cast<double>(btime) +
           static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
  }
  return std::nullopt;
}

// Each figure alone: one that throws (out of memory) is left unset.
template <class F>
auto guarded(F read) noexcept -> decltype(read()) {
  try {
    return read();
  } catch (...) {
    return std::nullopt;
  }
}

template <class T>
void gauge(prom_text& out, std::string_view name, std::string_view help,
           const std::optional<T>& value) {
  if (!value)
    return;
  out.family(name, "gauge", help);
  out.sample(name, {}, *value);
}

} // namespace

process_figures read_process_figures() noexcept {
  process_figures f;
  f.resident_memory_bytes = guarded(resident_bytes);
  f.open_fds = guarded(open_fds);
  f.max_fds = guarded(max_fds);
  f.threads = guarded(threads);
  f.start_time_seconds = guarded(start_time_seconds);
  return f;
}

void write_process_metrics(prom_text& out, const process_figures& f) noexcept {
  // Written aside first: a throw midway (out of memory) leaves `out` whole.
  try {
    prom_text mine;
    gauge(mine, "process_resident_memory_bytes",
          "Resident memory size in bytes.", f.resident_memory_bytes);
    gauge(mine, "process_open_fds", "Number of open file descriptors.",
          f.open_fds);
    gauge(mine, "process_max_fds",
          "Maximum number of open file descriptors (soft limit).", f.max_fds);
    gauge(mine, "process_threads", "Number of OS threads in the process.",
          f.threads);
    if (f.start_time_seconds) {
      constexpr std::string_view name = "process_start_time_seconds";
      mine.family(name, "gauge",
                  "Start time of the process since the Unix epoch in "
                  "seconds.");
      mine.sample_text(name, {}, fmt::format("{:.2f}", *f.start_time_seconds));
    }
    out.append(mine.take());
  } catch (...) {
    // nop: the process's figures are telemetry
  }
}

std::string process_metrics_text(const process_figures& f) noexcept {
  prom_text out;
  write_process_metrics(out, f);
  return out.take();
}

std::string process_metrics_text() noexcept {
  return process_metrics_text(read_process_figures());
}

} // namespace sluice::node
