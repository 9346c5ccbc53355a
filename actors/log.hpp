#pragma once

// The process's log (spdlog): one logger, `sluice`, writing to stderr, and a
// rate limit per kind of event so that a flood (a million bad requests, a
// Redis that fails every command) cannot fill a disk or drown the lines an
// operator needs.
//
// Level: the environment variable SLUICE_LOG_LEVEL (trace, debug, info,
// warn, error, critical, off; default info), read on first use.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#include <spdlog/spdlog.h>

namespace sluice {

/// The `sluice` logger. Thread-safe; never throws on a bad format argument
/// (spdlog reports it in the line instead).
spdlog::logger& logger();

/// At most `burst` lines per `interval` for one kind of event. Lines held
/// back are counted; the next line let through says how many there were.
/// Lock-free; a few lines more than `burst` may pass when threads race at
/// the start of an interval (NOTE: deliberate, a log limit need not be
/// exact).
class log_limit {
public:
  explicit log_limit(uint32_t burst = 5,
                     std::chrono::seconds interval = std::chrono::seconds{10})
      : burst_(burst)
      , interval_ns_(std::chrono::nanoseconds{interval}.count()) {
    // nop
  }

  /// Whether a line may be written now. When it may, `suppressed` is the
  /// number of lines held back since the last one that was written.
  bool allow(uint64_t& suppressed) noexcept;

private:
  uint32_t burst_;
  int64_t interval_ns_;
  std::atomic<int64_t> window_start_{INT64_MIN};
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> held_back_{0};
};

/// Logs at `level` unless `limit` holds the line back.
template <class... Ts>
void log_limited(log_limit& limit, spdlog::level::level_enum level,
                 spdlog::format_string_t<Ts...> format, Ts&&... args) {
  auto& lg = logger();
  if (!lg.should_log(level))
    return;
  uint64_t suppressed = 0;
  if (!limit.allow(suppressed))
    return;
  if (suppressed > 0)
    lg.log(level, "({} similar line(s) suppressed by the log rate limit)",
           suppressed);
  lg.log(level, format, std::forward<Ts>(args)...);
}

} // namespace sluice
