#pragma once

// A chunked `text/event-stream` answer written to one client connection:
// a streamed call's answer, or `GET /events`.
//
// The rules it keeps (SPEC §7):
// - A write owns its buffers until its completion handler has run: the
//   frames being written move out of the queue into `in_write_`, and only
//   that handler lets go of them. Dropping a client closes its socket; it
//   never clears buffers under a pending write.
// - The budget is bytes queued (`limit`), not frames: all frames waiting
//   when a write completes go out in the next write (one chunk), so a
//   client that reads keeps the queue short however small the frames are.
//   A client whose queue passes the budget, or whose one write takes longer
//   than `write_timeout`, is dropped.
//
// NOTE: there is no backpressure from the client to the upstream: a client
// that reads, but slower than the upstream sends, for longer than the
// budget absorbs, is dropped too. The budgets are far above any LLM answer.
//
// Not thread-safe: every call comes from the connection's strand.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "sluice/actors/wire/handler_memory.hpp"

namespace sluice::node {

/// Bytes a streamed call's answer may have queued for a slow client.
constexpr size_t answer_stream_budget = 8 * 1024 * 1024;

/// Bytes a `GET /events` subscriber may have queued.
constexpr size_t event_stream_budget = 256 * 1024;

/// Kernel send buffer of a `GET /events` socket. Set, because Linux would
/// otherwise grow it up to `net.ipv4.tcp_wmem`'s maximum (4 MiB) for a
/// client that does not read, beside the queue above.
constexpr int event_send_buffer_bytes = 64 * 1024;

/// Longest one write to a stream's client may take.
constexpr auto stream_write_timeout = std::chrono::seconds{30};

class sse_stream {
public:
  /// How a stream ended: `finished` (the last chunk went out), or `failed`
  /// (the client is gone, too slow, or was dropped).
  enum class end { finished, failed };

  /// `on_end` runs once, on the strand.
  sse_stream(boost::beast::tcp_stream& stream, size_t limit,
             std::function<void(end)> on_end);

  sse_stream(const sse_stream&) = delete;
  sse_stream& operator=(const sse_stream&) = delete;

  /// Prepares the `200 text/event-stream` header (chunked): it goes out
  /// with the first frame pushed (or the end), in one write. `owner` (the
  /// connection holding this stream) is kept alive by every pending write.
  /// `request_id` (if not empty) goes out as `X-Request-Id`;
  /// `allow_origin` (if not empty) makes it readable by that web origin's
  /// pages (`set_cors_headers`).
  void start(std::shared_ptr<void> owner, bool keep_alive, unsigned version,
             const std::string& request_id = {},
             const std::string& allow_origin = {},
             const std::vector<std::pair<std::string, std::string>>*
                 extra_headers = nullptr);

  /// Queues `frame` (one or more whole SSE events). Drops the client when
  /// the queue would pass the budget. A frame ending a stream (its last
  /// event is `data: [DONE]`) waits for the rest of the current round of
  /// the loop, so that the end of the stream, when it follows at once,
  /// goes out in the same write.
  void push(std::string frame);

  /// Queues the terminating chunk; `on_end(finished)` once it is out.
  void finish();

  /// Drops the client now: closes the socket (pending writes complete with
  /// an error, their buffers untouched until then).
  void drop();

  bool started() const noexcept { return started_; }
  /// The response header went out (in a write that started).
  bool header_sent() const noexcept { return head_sent_; }
  bool ended() const noexcept { return ended_; }
  size_t queued_bytes() const noexcept { return queued_bytes_; }

private:
  void write_next();
  void write_queued(std::shared_ptr<void> owner);
  void hold_write();
  template <class F>
  void post_own(F fn);
  void on_written(boost::system::error_code ec, size_t frames_bytes);
  void end_with(end e);

  boost::beast::tcp_stream& stream_;
  size_t limit_;
  std::function<void(end)> on_end_;
  std::weak_ptr<void> owner_;
  /// The response header, serialised; sent with the first write.
  std::string head_;
  bool head_sent_ = false;
  /// Frames waiting for the next write. It and `in_write_` trade places at
  /// each write, so neither allocates once both have grown.
  std::vector<std::string> queue_;
  /// Frames of the write in flight, and its buffers (with the chunk's
  /// framing): owned by it.
  std::vector<std::string> in_write_;
  std::vector<boost::asio::const_buffer> buffers_;
  std::array<char, 20> size_line_{};
  /// The state of its writes, one at a time: reused (no allocation per
  /// write).
  handler_memory write_memory_;
  size_t queued_bytes_ = 0;
  bool started_ = false;
  bool write_pending_ = false;
  bool finishing_ = false;
  /// A write is held until the end of the loop's current round.
  bool held_ = false;
  /// The write in flight carries the terminating chunk.
  bool last_in_write_ = false;
  /// The write in flight is an asynchronous one (under the timeout).
  bool async_written_ = false;
  /// The last write took everything, the end included (its handler may
  /// still be to run).
  bool all_sent_ = false;
  /// This stream among all (`post_own`).
  uint64_t serial_;
  bool ended_ = false;
};

} // namespace sluice::node
