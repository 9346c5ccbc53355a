#pragma once

// A message's head -- its start line, its fields and the blank line -- as
// one string, the bytes Beast's serializer would write for it. A head and
// a string body then go out in one gathered write of two buffers, where
// the serializer iterates a view of a few buffers per field at each step
// (and the kernel copies an iovec per piece).

#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/message.hpp>

namespace sluice {

/// Replaces `out` with the head of response header `h`.
template <class Fields>
void write_head(const boost::beast::http::header<false, Fields>& h,
                std::string& out) {
  typename Fields::writer w{h, h.version(), h.result_int()};
  auto bytes = w.get();
  out.resize(boost::asio::buffer_size(bytes));
  boost::asio::buffer_copy(boost::asio::buffer(out), bytes);
}

/// Replaces `out` with the head of request header `h`.
template <class Fields>
void write_head(const boost::beast::http::header<true, Fields>& h,
                std::string& out) {
  typename Fields::writer w{h, h.version(), h.method()};
  auto bytes = w.get();
  out.resize(boost::asio::buffer_size(bytes));
  boost::asio::buffer_copy(boost::asio::buffer(out), bytes);
}

} // namespace sluice
