#pragma once

// A tool server run as a child process (MCP's stdio transport): its stdin
// and stdout carry newline-delimited JSON-RPC, its stderr is its log. This
// is the process and its pipes on an Asio loop; what the lines mean is the
// MCP source's (actors/mcp/mcp_source.hpp).

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/actors/mcp/channel.hpp"
#include "sluice/actors/mcp/jsonrpc.hpp"

namespace sluice::mcp {

/// What to start: `command` (a path, or a name looked up on PATH) with
/// `args`, in the node's environment with `env` added (a name given there
/// replaces the node's), in `cwd` (empty: the node's).
struct child_command {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
};

/// Most bytes queued for a child's stdin: past it, `write` refuses (a
/// child that does not read its input holds no more of the node's memory).
constexpr size_t max_child_queued_bytes = 8u << 20;

/// The longest stderr line passed on (the rest of it is cut).
constexpr size_t max_child_log_line = 1024;

/// How a reaped child ended, in words ("exited with status 3", "killed by
/// signal 9"), from waitpid's status (-1: not known).
std::string exit_words(int wait_status);

/// The channel of a stdio server: `message` is one line of its stdout
/// (without its newline), `log_line` one line of its stderr (cut to
/// `max_child_log_line`), `dropped` a stdout line over the limit (dropped
/// whole), `gone` its exit once it is reaped (`exit_words`).
class stdio_child : public channel,
                    public std::enable_shared_from_this<stdio_child> {
public:
  /// Starts the process, in a process group of its own, with pipes for its
  /// three streams. Throws `std::system_error` when it cannot (no such
  /// command, no descriptors or processes left). Call on the loop's thread
  /// or before the loop runs.
  static std::shared_ptr<stdio_child> spawn(boost::asio::io_context& loop,
                                            const child_command& cmd,
                                            handlers h, size_t max_line_bytes);

  ~stdio_child() override;

  stdio_child(const stdio_child&) = delete;
  stdio_child& operator=(const stdio_child&) = delete;

  /// Queues `line` and a newline for its stdin. False (nothing queued)
  /// when its input is closed or `max_child_queued_bytes` would be passed.
  /// On the loop.
  bool write(std::string line);

  /// `write`; `done` hears of it only when the line was refused.
  void send(uint64_t id, std::string text, send_done done,
            duration timeout = duration::zero()) override;

  /// Ends it as MCP's stdio transport says: stdin closed; SIGTERM to its
  /// group if it is still there half of `grace` later, SIGKILL at `grace`.
  /// `gone` follows once it is reaped. Idempotent. On the loop.
  void stop(std::chrono::milliseconds grace) override;

  pid_t pid() const noexcept override { return pid_; }

  /// Bytes queued for its stdin now.
  size_t queued_bytes() const noexcept { return queued_bytes_; }

  /// Only through `spawn`.
  stdio_child(boost::asio::io_context& loop, handlers h, size_t max_line);

private:
  void read_out();
  void read_err();
  void write_next();
  /// Polls for its exit (every second while it runs, more often once its
  /// output ended or it was told to stop).
  void watch(std::chrono::milliseconds every);
  /// Reaps it if it is gone; true then.
  bool reaped();
  void kill_group(int sig) noexcept;

  boost::asio::posix::stream_descriptor in_, out_, err_;
  boost::asio::steady_timer timer_;
  size_t max_line_;
  pid_t pid_ = -1;
  bool gone_ = false;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point term_at_{};
  std::chrono::steady_clock::time_point kill_at_{};
  bool termed_ = false;
  line_splitter out_lines_;
  size_t dropped_seen_ = 0;
  std::string err_buf_;
  bool err_cut_ = false; // inside a stderr line already passed on
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  char out_chunk_[16384];
  char err_chunk_[4096];
};

} // namespace sluice::mcp
