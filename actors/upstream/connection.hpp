#pragma once

// One connection of the HTTP source to its upstream: plain TCP, or TLS over
// TCP for an `https://` source. The source's engine is written once for
// both: it connects through `tcp()` (and times a step out by closing it),
// and reads and writes through this class, which dispatches to the one
// stream it holds (Beast's `http::async_write` takes it as any other
// stream). Private to the HTTP client; the TLS context of a source is built here too, so
// the TLS rules (what is verified, how a refusal is explained) are in one
// file.

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "sluice/actors/wire/handler_memory.hpp"

namespace sluice {

struct http_tls_config;

namespace upstream {

/// The TLS client context of a source: TLS 1.2 or later; with `verify`, the
/// peer's certificate checked against `ca_file` or the system store;
/// the client certificate and key, if given, loaded and checked to match.
/// Throws `std::invalid_argument("FIELD: problem")` (FIELD: `ca_file`,
/// `client_cert`, `client_key`) for a file that cannot be read or used.
std::shared_ptr<boost::asio::ssl::context>
make_tls_context(const http_tls_config& cfg);

class connection {
public:
  using tcp_stream = boost::beast::tcp_stream;
  using tls_stream = boost::beast::ssl_stream<tcp_stream>;
  using executor_type = tcp_stream::executor_type;
  using error_code = boost::system::error_code;

  /// A plain TCP connection when `tls` is null, else a TLS one on `tls`
  /// (which must outlive it).
  connection(boost::asio::io_context& ioc, boost::asio::ssl::context* tls);

  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  bool secure() const noexcept { return tls_.has_value(); }

  /// The TCP layer: connecting, the socket (whose close ends any step in
  /// progress, the TLS ones on top of it too).
  tcp_stream& tcp() noexcept { return tls_ ? tls_->next_layer() : *tcp_; }

  executor_type get_executor() { return tcp().get_executor(); }

  /// Sets whom the TLS handshake expects: `name` goes out as SNI (unless it
  /// is an IP address) and, with `verify`, must be in the certificate.
  /// Returns false if OpenSSL refused a setting (out of memory).
  bool expect_peer(const std::string& name, bool verify);

  /// Runs the TLS client handshake (a secure connection only).
  template <class Handler>
  void async_handshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::client,
                          std::forward<Handler>(handler));
  }

  /// Runs the TLS server handshake (a secure connection only; a remote
  /// source's served side, runtime/remote_link.hpp, accepts on `tcp()`).
  template <class Handler>
  void async_server_handshake(Handler&& handler) {
    tls_->async_handshake(boost::asio::ssl::stream_base::server,
                          std::forward<Handler>(handler));
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_)
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    else
      tcp_->async_read_some(buffers, std::forward<Handler>(handler));
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_)
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    else
      tcp_->async_write_some(buffers, std::forward<Handler>(handler));
  }

  /// Why this connection may not carry another request, or nullptr if it
  /// may: anything the upstream sent since its last answer (a stale or
  /// extra answer, a TLS alert) or its close would be read as the next
  /// call's answer. Looks at the socket and at what the TLS layer holds.
  /// NOTE: bytes still in Asio's own TLS input buffer (not yet handed to
  /// OpenSSL) are not seen; that buffer fills only when one socket read
  /// brings more than OpenSSL takes at once (17 KiB), and a complete
  /// answer ends its read long before.
  const char* reuse_problem();

  /// After a failed handshake: why the peer's certificate was refused
  /// (OpenSSL's text for the verify result, e.g. "certificate has
  /// expired"), or empty if the certificate was not the problem.
  std::string verify_failure();

  /// Closes the socket at once (no TLS close_notify: the peer sees the
  /// close).
  void close() noexcept;

  /// The state of its reads, one at a time, reused from one read to the
  /// next and from one exchange to the next on a kept connection (no
  /// allocation per read). Its operations hold what owns the connection.
  handler_memory& read_memory() noexcept { return read_memory_; }

private:
  /// First: it outlives the streams whose reads it holds.
  handler_memory read_memory_;
  std::optional<tcp_stream> tcp_;
  std::optional<tls_stream> tls_;
  /// The peer's certificate is checked (`expect_peer`).
  bool verify_ = false;
};

/// The upstream ended the stream: an orderly EOF, or, over TLS, a close
/// without close_notify (`stream_truncated`), which many servers do after
/// their last answer. NOTE: for a body delimited by the close (no length,
/// not chunked) a missing close_notify means the end cannot be told from a
/// cut by someone on the path; such upstreams are rare (HTTP/1.0 style) and
/// accepted as with plain TCP.
bool is_end_of_stream(const boost::system::error_code& ec) noexcept;

/// The error is from the TLS layer (a handshake, an alert, a bad record).
bool is_tls_error(const boost::system::error_code& ec) noexcept;

} // namespace upstream

} // namespace sluice
