#include "sluice/runtime/node/sse_stream.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>

#include <array>
#include <atomic>
#include <string_view>

#include "sluice/actors/wire/http_head.hpp"
#include "sluice/actors/wire/piece_pool.hpp"
#include "sluice/runtime/node/request_access.hpp"

namespace sluice::node {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

void sse_stream::start(
    std::shared_ptr<void> owner, bool keep_alive, unsigned version,
    const std::string& request_id, const std::string& allow_origin,
    const std::vector<std::pair<std::string, std::string>>* extra_headers) {
  owner_ = owner;
  started_ = true;
  http::response<http::empty_body, http_fields> header{http::status::ok,
                                                       version};
  header.set(http::field::server, "sluice-node");
  header.set(http::field::content_type, "text/event-stream");
  header.set(http::field::cache_control, "no-cache");
  if (!request_id.empty())
    header.set("X-Request-Id", request_id);
  if (!allow_origin.empty())
    set_cors_headers(header, allow_origin);
  if (extra_headers != nullptr)
    for (auto& [name, value] : *extra_headers)
      header.set(name, value);
  header.keep_alive(keep_alive);
  header.chunked(true);
  // The status line, the fields and the blank line, kept as bytes: they
  // go out in the first write, with the first frame.
  write_head(header.base(), head_);
}

namespace {

/// The frame's last event is `data: [DONE]`: an OpenAI stream's end, which
/// the end of the chunked answer follows. A scan of its tail, no parse.
bool ends_stream(const std::string& frame) {
  static constexpr std::string_view done = "data: [DONE]";
  std::string_view f{frame};
  while (!f.empty() && (f.back() == '\n' || f.back() == '\r'))
    f.remove_suffix(1);
  if (f.size() < done.size() || f.substr(f.size() - done.size()) != done)
    return false;
  f.remove_suffix(done.size());
  return f.empty() || f.back() == '\n';
}

constexpr char crlf[] = "\r\n";
constexpr char last_chunk[] = "0\r\n\r\n";

/// Writes `size`'s chunk size line ("1a2\r\n") into `out`; returns its
/// length.
size_t chunk_size_line(size_t size, std::array<char, 20>& out) {
  static constexpr char digits[] = "0123456789abcdef";
  char tmp[16];
  size_t n = 0;
  do {
    tmp[n++] = digits[size & 0xf];
    size >>= 4;
  } while (size != 0);
  size_t len = 0;
  while (n > 0)
    out[len++] = tmp[--n];
  out[len++] = '\r';
  out[len++] = '\n';
  return len;
}

/// A view of buffers a stream keeps: what Asio copies at each step of a
/// write is this pointer and count, never the buffers.
struct buffer_span {
  using value_type = net::const_buffer;
  using const_iterator = const net::const_buffer*;
  const net::const_buffer* first;
  size_t count;
  const_iterator begin() const noexcept { return first; }
  const_iterator end() const noexcept { return first + count; }
};

} // namespace

namespace {

/// Serial numbers of streams: a posted handler finds out whether the
/// stream at its address is still the one that posted it (a connection
/// builds the next request's stream in the same place).
std::atomic<uint64_t> next_serial{1};

} // namespace

sse_stream::sse_stream(beast::tcp_stream& stream, size_t limit,
                       std::function<void(end)> on_end)
    : stream_(stream)
    , limit_(limit)
    , on_end_(std::move(on_end))
    , serial_(next_serial.fetch_add(1, std::memory_order_relaxed)) {
  // nop
}

void sse_stream::push(std::string frame) {
  if (ended_ || finishing_ || frame.empty())
    return;
  if (queued_bytes_ + frame.size() > limit_)
    return drop(); // a client that cannot keep up
  // A frame that waits (a client that reads slowly) keeps no more memory
  // than it needs: a piece read into a pooled string may have 16 KiB of
  // room for a few bytes, and the budget counts bytes.
  if ((write_pending_ || held_) && frame.capacity() > 2 * frame.size() + 64)
    frame.shrink_to_fit();
  queued_bytes_ += frame.size();
  bool last = ends_stream(frame);
  queue_.push_back(std::move(frame));
  if (last)
    return hold_write();
  write_next();
}

void sse_stream::finish() {
  if (ended_ || finishing_)
    return;
  finishing_ = true;
  write_next();
}

void sse_stream::drop() {
  if (ended_)
    return;
  // Frames not yet written go; those of a pending write stay in
  // `in_write_` until its handler has run.
  queue_.clear();
  beast::error_code ignored;
  stream_.socket().close(ignored);
  // The end of the stream may be out already, its handler still to run.
  end_with(all_sent_ ? end::finished : end::failed);
}

// Runs `fn` later on the stream's loop, if the stream is still this one
// and its owner lives; an exception drops the client.
template <class F>
void sse_stream::post_own(F fn) {
  net::post(stream_.get_executor(),
            [this, owner = owner_, serial = serial_, fn = std::move(fn)] {
              auto alive = owner.lock();
              if (!alive || serial_ != serial)
                return; // the connection is gone, or streams another answer
              try {
                fn();
              } catch (...) {
                drop();
              }
            });
}

// The stream's last event came: its end (the call's result) usually
// follows in the same round of the loop (the upstream's last read carried
// both). Write after that round, so both leave in one write; a result that
// comes later finds the frame written.
void sse_stream::hold_write() {
  if (held_ || write_pending_ || owner_.expired())
    return; // a write in flight takes the frame when it completes
  held_ = true;
  post_own([this] {
    held_ = false;
    write_next();
  });
}

void sse_stream::write_next() {
  if (!started_ || write_pending_ || ended_ || (held_ && !finishing_))
    return;
  auto owner = owner_.lock();
  if (!owner)
    return;
  if (queue_.empty() && !finishing_)
    return;
  try {
    write_queued(std::move(owner));
  } catch (...) {
    drop(); // no memory for the buffers: the stream cannot go on
  }
}

void sse_stream::write_queued(std::shared_ptr<void> owner) {
  // One write: the header the first time, then all queued frames as one
  // chunk (its size line, the frames, CRLF), and the last chunk when
  // finishing. Framed by hand into buffers this stream keeps: Beast's
  // `make_chunk` copies its buffer sequence (a vector here) at each step
  // of the write, an allocation each. The buffers are made before any
  // state changes (making them may throw).
  buffers_.clear();
  buffers_.reserve(queue_.size() + 4);
  if (!head_sent_)
    buffers_.emplace_back(net::buffer(head_));
  size_t bytes = 0;
  for (auto& f : queue_)
    bytes += f.size();
  if (bytes > 0) {
    buffers_.emplace_back(
        net::buffer(size_line_.data(), chunk_size_line(bytes, size_line_)));
    for (auto& f : queue_)
      buffers_.emplace_back(
          net::buffer(f)); // the strings move, not their bytes
    buffers_.emplace_back(net::buffer(crlf, 2));
  }
  bool last = finishing_;
  if (last)
    buffers_.emplace_back(net::buffer(last_chunk, 5));
  // The queue becomes the write's, and the emptied vector of the last
  // write takes new frames: both keep their capacity. (A string's bytes
  // stay where they are when the vectors trade places.)
  in_write_.clear();
  std::swap(queue_, in_write_);
  head_sent_ = true;
  last_in_write_ = last;
  write_pending_ = true;
  // First without waiting: a socket with room in its send buffer (the
  // usual case) takes it all now, and the write is over with no operation,
  // no timer and no round of the loop. What it does not take is written
  // asynchronously, under the write timeout. (One `write_some` sends at
  // most 64 buffers: a long queue takes several.)
  beast::error_code ec;
  auto& socket = stream_.socket();
  if (!socket.non_blocking())
    socket.non_blocking(true, ec);
  size_t from = 0;
  while (!ec && from < buffers_.size()) {
    size_t n = socket.write_some(
        buffer_span{buffers_.data() + from, buffers_.size() - from}, ec);
    while (n > 0 && n >= buffers_[from].size())
      n -= buffers_[from++].size();
    if (n > 0)
      buffers_[from] += n;
  }
  if (ec == net::error::would_block || ec == net::error::try_again)
    ec = {};
  bool all = !ec && from == buffers_.size();
  if (all && !last)
    return on_written(ec, bytes); // queues nothing more: returns
  if (ec || all) {
    // The end of the stream, or a failed write: what follows (the
    // connection's next request, or its close) runs as a handler of its
    // own, not inside the caller's code.
    all_sent_ = all;
    post_own([this, bytes, ec] { on_written(ec, bytes); });
    return;
  }
  async_written_ = true;
  stream_.expires_after(stream_write_timeout);
  net::async_write(
      stream_, buffer_span{buffers_.data() + from, buffers_.size() - from},
      bind_memory(write_memory_, [this, owner = std::move(owner),
                                  bytes](beast::error_code ec, std::size_t) {
        on_written(ec, bytes);
      }));
}

void sse_stream::on_written(beast::error_code ec, size_t frames_bytes) {
  write_pending_ = false;
  // The write is over: its buffers may go now, their strings to be read
  // into again (`piece_pool`).
  for (auto& f : in_write_)
    give_back_piece(std::move(f));
  in_write_.clear();
  buffers_.clear();
  queued_bytes_ -= frames_bytes;
  if (async_written_) {
    async_written_ = false;
    stream_.expires_never();
  }
  if (ended_)
    return; // dropped meanwhile
  if (ec)
    return end_with(end::failed);
  if (last_in_write_)
    return end_with(end::finished);
  write_next();
}

void sse_stream::end_with(end e) {
  if (ended_)
    return;
  ended_ = true;
  if (on_end_) {
    auto fn = std::move(on_end_);
    on_end_ = nullptr;
    fn(e);
  }
}

} // namespace sluice::node
