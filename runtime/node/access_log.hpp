#pragma once

// The node's access log: one JSON line per request (JSON Lines), through
// spdlog, to stdout or a file. Each line is written (and flushed) as the
// request ends, so nothing is lost when the process dies.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "sluice/runtime/policy/log_sampler.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace spdlog {
class logger;
} // namespace spdlog

namespace sluice::node {

// -- limits of one line (issue 30, finding 11) --------------------------------

/// Longest path written; a longer one is cut (`cut_field`).
constexpr size_t max_logged_path_bytes = 256;
/// Longest request id, model, key name, error code or source name written.
constexpr size_t max_logged_id_bytes = 128;
/// Longest method written.
constexpr size_t max_logged_method_bytes = 32;
/// So the longest line: 256 + 5 × 128 + 32 bytes of fields, their marks,
/// the JSON around them and JSON escapes of control characters (6 bytes
/// each at worst: the bound counts it) stay under this.
constexpr size_t max_access_line_bytes = 8 * 1024;

/// `text` if it has at most `limit` bytes, else its first bytes (cut before
/// a UTF-8 sequence that would not fit whole) and "…[cut N bytes]", N the
/// bytes left out. The mark is on top of `limit`.
std::string cut_field(std::string_view text, size_t limit);

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
  /// Lines of refused requests left out since the last line written
  /// (`policy::log_sampler`); 0: the field is not written.
  uint64_t suppressed = 0;
};

/// The JSON line of `r` (no newline): `time` (UTC, ISO 8601 with ms),
/// `request_id`, `method`, `path`, `model`, `key`, `status`, `error`,
/// `source`, `attempts`, `hedged`, `won_attempt` (null: none), `total_ms`,
/// `upstream_ms`, `overhead_us` (total minus upstream: the node's own time,
/// admission waits and backoff included), and `suppressed` when lines were left
/// out before it. Empty strings are null. Invalid UTF-8 is replaced; each text
/// field is cut to its limit above (`cut_field`).
std::string access_line(const access_record& r);

/// The log itself.
class access_log {
public:
  /// `target`: "stdout", "off", or a file path (appended to; created if
  /// missing). Throws `std::runtime_error` naming the file if it cannot be
  /// opened.
  explicit access_log(const std::string& target);
  ~access_log();

  bool enabled() const noexcept { return enabled_; }

  /// Writes `r`'s line, unless it is a refused request's the sampler
  /// leaves out (`policy::log_sampler`: counted, and the next line written
  /// says how many). Never throws (a failed write is counted by spdlog's
  /// error handler, not raised). Any thread.
  void write(const access_record& r) noexcept;

  /// SIGUSR1: opens the file again by its path (after `mv` of the old one,
  /// lines go to a new file there); with stdout or "off", nothing. The
  /// file is opened for appending (`O_APPEND`), so `logrotate`'s
  /// `copytruncate` needs no reopen: after the truncation, lines are
  /// written from the start. Returns false, and keeps the old file, if the
  /// path cannot be opened. Any thread.
  bool reopen() noexcept;

  /// Lines of refused requests left out so far (for /status).
  uint64_t suppressed_total() const noexcept { return suppressed_total_; }

private:
  std::string target_;
  bool enabled_ = false;
  /// Swapped whole by `reopen` while other threads write through it.
  std::shared_ptr<spdlog::logger> logger_;
  std::mutex sampler_mx_;
  policy::log_sampler sampler_;
  std::atomic<uint64_t> suppressed_total_{0};
};

} // namespace sluice::node
