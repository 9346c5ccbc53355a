#include "sluice/runtime/node/sse_stream.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>

#include "sluice/runtime/node/request_access.hpp"

namespace sluice::node {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

sse_stream::sse_stream(beast::tcp_stream& stream, size_t limit,
                       std::function<void(end)> on_end)
    : stream_(stream)
    , limit_(limit)
    , on_end_(std::move(on_end)) {
  // nop
}

void sse_stream::start(std::shared_ptr<void> owner, bool keep_alive,
                       unsigned version, const std::string& request_id,
                       const std::string& allow_origin) {
  owner_ = owner;
  started_ = true;
  header_.emplace(http::status::ok, version);
  header_->set(http::field::server, "sluice-node");
  header_->set(http::field::content_type, "text/event-stream");
  header_->set(http::field::cache_control, "no-cache");
  if (!request_id.empty())
    header_->set("X-Request-Id", request_id);
  if (!allow_origin.empty())
    set_cors_headers(*header_, allow_origin);
  header_->keep_alive(keep_alive);
  header_->chunked(true);
  serializer_.emplace(*header_);
  write_pending_ = true;
  stream_.expires_after(stream_write_timeout);
  // Write the header, then whatever was queued meanwhile.
  http::async_write_header(
      stream_, *serializer_,
      [this, owner = std::move(owner)](beast::error_code ec, std::size_t) {
        on_written(ec, 0);
      });
}

void sse_stream::push(std::string frame) {
  if (ended_ || finishing_ || frame.empty())
    return;
  if (queued_bytes_ + frame.size() > limit_)
    return drop(); // a client that cannot keep up
  queued_bytes_ += frame.size();
  queue_.push_back(std::move(frame));
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
  end_with(end::failed);
}

void sse_stream::write_next() {
  if (!started_ || write_pending_ || ended_)
    return;
  auto owner = owner_.lock();
  if (!owner)
    return;
  if (queue_.empty() && !finishing_)
    return;
  size_t bytes = 0;
  in_write_.clear();
  buffers_.clear();
  while (!queue_.empty()) {
    bytes += queue_.front().size();
    in_write_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  for (auto& f : in_write_)
    buffers_.emplace_back(net::buffer(f));
  bool last = finishing_;
  last_in_write_ = last;
  write_pending_ = true;
  stream_.expires_after(stream_write_timeout);
  auto done = [this, owner = std::move(owner), bytes](
                  beast::error_code ec, std::size_t) { on_written(ec, bytes); };
  // All queued frames as one chunk (and the last chunk when finishing).
  if (buffers_.empty())
    net::async_write(stream_, http::make_chunk_last(), std::move(done));
  else if (last)
    net::async_write(
        stream_,
        beast::buffers_cat(http::make_chunk(buffers_), http::make_chunk_last()),
        std::move(done));
  else
    net::async_write(stream_, http::make_chunk(buffers_), std::move(done));
}

void sse_stream::on_written(beast::error_code ec, size_t frames_bytes) {
  write_pending_ = false;
  // The write is over: its buffers may go now.
  in_write_.clear();
  buffers_.clear();
  queued_bytes_ -= frames_bytes;
  stream_.expires_never();
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
