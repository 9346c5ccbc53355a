#pragma once

// The node's access log: one JSON line per request (JSON Lines), to stdout
// or a file. The request's loop only copies the record into a bounded
// queue; a writer thread of the log's own formats the lines and writes them
// in batches (one write(2) per batch of up to `access_write_batch_bytes`),
// at the latest `access_flush_interval` after a line was queued, and
// everything queued at destruction (a clean stop, SIGTERM) before the
// destructor returns. NOTE: a crash (SIGKILL, abort) loses the lines queued
// and not yet written: at worst those of the last `access_flush_interval`
// (1 s). A full queue drops the line and counts it (`dropped_total`,
// /status `refused.access_log_lines_dropped`), never blocks the loop.
// NOTE: a stdout nobody reads (a full pipe) holds the writer, and so the
// destructor's drain, until it is read; the loops only drop lines.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/runtime/policy/log_sampler.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"
#include "sluice/runtime/policy/time.hpp"

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

// -- limits of the writer (issue 31, item 5) ---------------------------------

/// Records queued for the writer at most; one more is dropped and counted.
constexpr size_t max_queued_access_lines = 64 * 1024;
/// Bytes queued at most: each record's own size (~300 bytes) and its
/// fields' text before their cut. 64 Ki ordinary records take ~20 MiB; a
/// flood of long paths stops at this bound before the line count.
constexpr size_t max_queued_access_bytes = 32 * 1024 * 1024;
/// A queued line is written at the latest this long after it was queued
/// (plus the time of the writes before it): what a crash loses at worst.
constexpr std::chrono::milliseconds access_flush_interval{1000};
/// The writer wakes before the interval once this much is queued (as
/// counted above), and writes about this much (plus one line) per write(2).
constexpr size_t access_write_batch_bytes = 64 * 1024;
/// At most one warning line about dropped lines per this long.
constexpr std::chrono::seconds access_drop_warning_interval{10};

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
  /// What the call used, as its answer said or as estimated (none: not
  /// read), and what it cost (none: its model has no price).
  std::optional<policy::token_usage> usage;
  std::optional<policy::money> cost;
  /// A tool call on /mcp: the tool (its gateway name), the server it went
  /// to, and the JSON-RPC id of the client's request (JSON text); empty:
  /// not written. Also a JSON-RPC error's code (0: none).
  std::string tool;
  std::string mcp_server;
  std::string rpc_id;
  int rpc_error = 0;
};

/// Makes `r` as a new record, its strings keeping their room (a
/// connection's next request reuses it without allocating).
void clear_record(access_record& r) noexcept;

/// The JSON line of `r` (no newline): `time` (UTC, ISO 8601 with ms),
/// `request_id`, `method`, `path`, `model`, `key`, `status`, `error`,
/// `source`, `attempts`, `hedged`, `won_attempt` (null: none), `total_ms`,
/// `upstream_ms`, `overhead_us` (total minus upstream: the node's own time,
/// admission waits and backoff included), and `suppressed` when lines were left
/// out before it; for a call whose usage was read, `prompt_tokens`,
/// `completion_tokens`, `cached_tokens`, `usage_estimated` and `cost_usd`
/// (null: no price). Empty strings are null. Invalid UTF-8 is replaced; each
/// text field is cut to its limit above (`cut_field`).
std::string access_line(const access_record& r);

/// How the writer runs; the defaults are the limits above. Tests shrink them.
struct access_log_options {
  size_t max_queued_lines = max_queued_access_lines;
  size_t max_queued_bytes = max_queued_access_bytes;
  std::chrono::milliseconds flush_interval = access_flush_interval;
  /// Tests only: called on the writer thread before each batch is written
  /// (e.g. to hold the writer while the test fills the queue). Must not
  /// throw.
  std::function<void()> before_batch;
};

/// The log itself.
class access_log {
public:
  /// `target`: "stdout", "off", or a file path (appended to; created if
  /// missing). Throws `std::runtime_error` naming the file if it cannot be
  /// opened. Starts the writer thread unless "off".
  explicit access_log(const std::string& target,
                      access_log_options options = {});
  /// Writes what is queued (and the count of refusals left out since the
  /// last line), then stops the writer. Blocks: not on a loop.
  ~access_log();

  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;

  bool enabled() const noexcept { return enabled_; }

  /// Queues `r`'s line, unless it is a refused request's the sampler
  /// leaves out (`policy::log_sampler`: counted, and the next line written
  /// says how many), or the queue is full (dropped, counted in
  /// `dropped_total`). No file I/O and no formatting on the caller's
  /// thread; it wakes the writer only when the queue was empty or reaches a
  /// batch. Never throws. Any thread.
  void write(const access_record& r) noexcept;

  /// SIGUSR1: opens the file again by its path (after `mv` of the old one,
  /// lines go to a new file there); with stdout or "off", nothing. The
  /// file is opened here, on the caller's thread, and the writer switches
  /// to it in queue order: the lines queued before the reopen go to the
  /// old file, the later ones to the new, none lost or reordered. The file
  /// is opened for appending (`O_APPEND`), so `logrotate`'s `copytruncate`
  /// needs no reopen: after the truncation, lines are written from the
  /// start. Returns false, and keeps the old file, if the path cannot be
  /// opened. Any thread but a loop's (it opens a file).
  bool reopen() noexcept;

  /// Blocks until every line queued before the call is written (to the
  /// kernel: no fsync). For tests and the shutdown; not on a loop.
  void flush() noexcept;

  /// Lines of refused requests left out so far (for /status).
  uint64_t suppressed_total() const noexcept { return suppressed_total_; }

  /// Lines dropped so far because the queue was full (for /status).
  uint64_t dropped_total() const noexcept { return dropped_total_; }

private:
  // -- member types -----------------------------------------------------------

  /// One queued item: a record to format, a line already made (the last
  /// `suppressed` count), or a file to switch to (`reopen`).
  struct entry {
    enum class kind : uint8_t { record, text, switch_file } what;
    access_record record;
    std::string text;
    int fd = -1;
  };

  void run() noexcept;
  void write_batch(std::vector<entry>& batch, std::string& buf) noexcept;
  void write_out(const std::string& bytes) noexcept;
  void push_unbounded(entry e);
  void warn_dropped(bool final) noexcept;

  std::string target_;
  bool enabled_ = false;
  access_log_options options_;

  /// The writer's file; only the writer thread touches it once running.
  int fd_ = -1;
  bool owns_fd_ = false;

  std::atomic<uint64_t> suppressed_total_{0};
  std::atomic<uint64_t> dropped_total_{0};
  /// `dropped_total_` when the last warning was logged (writer only).
  uint64_t dropped_warned_ = 0;
  std::chrono::steady_clock::time_point warned_at_{};

  // -- the queue, under `mx_` -------------------------------------------------

  std::mutex mx_;
  /// Under `mx_` too: one lock per line.
  policy::log_sampler sampler_;
  /// Wakes the writer: the first item in an empty queue, a batch full,
  /// a flush or the stop.
  std::condition_variable wake_;
  /// Wakes `flush` callers: a batch written.
  std::condition_variable written_;
  std::vector<entry> queue_;
  size_t queued_bytes_ = 0;
  /// Items ever queued, and of those ever written (in order): a flush
  /// waits for the second to reach what the first was at its call.
  uint64_t queued_seq_ = 0;
  uint64_t written_seq_ = 0;
  bool flush_asked_ = false;
  bool stopping_ = false;
  bool writer_done_ = false;
  std::thread writer_;
};

} // namespace sluice::node
