#pragma once

// The node's access log: one JSON line per request (JSON Lines), through
// spdlog, to stdout or a file. Each line is written (and flushed) as the
// request ends, so nothing is lost when the process dies.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/runtime/policy/time.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace sluice::node {

/// What one line says about one request.
struct access_record {
  std::chrono::system_clock::time_point time;
  std::string request_id;
  std::string method;
  std::string path;
  /// The request's `model` (empty: none or not a call).
  std::string model;
  /// The client key's name (empty: anonymous).
  std::string key;
  unsigned status = 0;
  /// The error's `code` (e.g. "tool_busy", "invalid_api_key"); empty: none.
  std::string error;
  /// The source that answered (empty: none).
  std::string source;
  uint32_t attempts = 0;
  /// Of those, hedged attempts (started beside a slow one).
  uint32_t hedged = 0;
  /// Which attempt's answer the client got, counted from 1 in the order
  /// attempts ended (0: none).
  uint32_t won_attempt = 0;
  /// From the request's header read to its answer (written, or its
  /// stream's end).
  duration total{};
  /// The attempts' time at upstreams (`call_result::upstream_time`: summed,
  /// or their union when hedged attempts overlapped).
  duration upstream{};
};

/// The JSON line of `r` (no newline): `time` (UTC, ISO 8601 with ms),
/// `request_id`, `method`, `path`, `model`, `key`, `status`, `error`,
/// `source`, `attempts`, `hedged`, `won_attempt` (null: none), `total_ms`, `upstream_ms`, `overhead_us` (total
/// minus upstream: the node's own time, admission waits and backoff
/// included). Empty strings are null. Invalid UTF-8 is replaced.
std::string access_line(const access_record& r);

/// The log itself.
class access_log {
public:
  /// `target`: "stdout", "off", or a file path (appended to; created if
  /// missing). Throws `std::runtime_error` naming the file if it cannot be
  /// opened.
  explicit access_log(const std::string& target);
  ~access_log();

  bool enabled() const noexcept { return logger_ != nullptr; }

  /// Writes `r`'s line. Never throws (a failed write is counted by spdlog's
  /// error handler, not raised).
  void write(const access_record& r) noexcept;

private:
  std::shared_ptr<spdlog::logger> logger_;
};

} // namespace sluice::node
