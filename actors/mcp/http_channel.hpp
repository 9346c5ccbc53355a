#pragma once

// An upstream MCP server over Streamable HTTP (MCP 2025-06-18 and
// 2025-11-25): each message the gateway sends is one POST to the server's
// endpoint, answered by JSON (one message), by an SSE stream (the server's
// requests and notifications for it, then its answer) or by 202 (a
// notification or a response). The session the server names in its
// answer to `initialize` (`Mcp-Session-Id`) goes with every later request,
// with the negotiated `MCP-Protocol-Version`; the server's own messages
// (`tools/list_changed`) come on a GET stream, opened again when it ends;
// a stop DELETEs the session. Plain TCP or TLS with the sources' settings
// (actors/upstream/connection.hpp), a few kept-alive connections for reuse.
//
// Bounds: one message (a JSON body, an SSE event) at most
// `max_message_bytes`, dropped whole past it; an error body at most 64 KiB;
// the header at most `upstream::max_header_bytes`. Deadlines: the connect
// (and TLS handshake) `connect_timeout`; a whole exchange the `timeout`
// its sender gives (the source times its calls itself and cancels them).

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/actors/mcp/channel.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/runtime/policy/mcp/server_settings.hpp"

namespace boost::asio::ssl {
class context;
} // namespace boost::asio::ssl

namespace sluice::upstream {
class connection;
} // namespace sluice::upstream

namespace sluice::mcp {

/// Most connections kept open for reuse.
constexpr size_t max_idle_http_connections = 4;

/// The most of the gateway's own messages to a server in flight at once
/// (each a POST: answers to the server's requests, notifications): a
/// server that sends thousands of pings gets no more sockets than this.
/// Calls are bounded by admission.
constexpr size_t max_quiet_exchanges = 64;

/// Longest error (non-2xx) body read.
constexpr size_t max_http_error_body = 64 * 1024;

/// Longest `Mcp-Session-Id` accepted (visible ASCII only).
constexpr size_t max_session_id_bytes = 256;

class http_channel : public channel,
                     public std::enable_shared_from_this<http_channel> {
public:
  /// A channel to `cfg.url`. Throws `std::invalid_argument` for a URL or
  /// TLS setting that cannot be used (validated before). On the loop's
  /// thread or before the loop runs.
  static std::shared_ptr<http_channel> make(boost::asio::io_context& loop,
                                            const mcp_server_settings& cfg,
                                            handlers h);

  ~http_channel() override;

  void send(uint64_t id, std::string text, send_done done,
            duration timeout = duration::zero()) override;
  void cancel(uint64_t id) override;
  void negotiated(const std::string& version) override;
  void listen() override;
  void stop(std::chrono::milliseconds grace) override;

  /// The session the server gave (empty: none yet, or it gives none).
  const std::string& session() const noexcept { return session_; }

  struct exchange;
  using exchange_ptr = std::shared_ptr<exchange>;

  /// Only through `make`.
  http_channel(boost::asio::io_context& loop, const mcp_server_settings& cfg,
               handlers h);

private:
  exchange_ptr open(uint64_t id, int method, std::string body, send_done done,
                    duration timeout);
  void connect(const exchange_ptr& ex);
  void handshake(const exchange_ptr& ex);
  void write(const exchange_ptr& ex);
  void read(const exchange_ptr& ex);
  void on_header(const exchange_ptr& ex);
  void on_body(const exchange_ptr& ex, std::string piece);
  void finish(const exchange_ptr& ex, bool complete);
  void fail(const exchange_ptr& ex, policy::mcp::delivery how,
            policy::outcome_kind kind, std::string reason,
            bool session_gone = false);
  void close(const exchange_ptr& ex);
  void relisten();
  void session_lost(std::string how);
  /// Stops every exchange (no `done` called) and opens no more.
  void close_all();

  boost::asio::io_context& ioc_;
  std::string name_;
  upstream::parsed_url url_;
  std::string host_header_;
  std::string target_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::string peer_name_;
  bool verify_ = true;
  std::vector<std::pair<std::string, std::string>> headers_;
  duration connect_timeout_;
  size_t max_message_;
  boost::asio::ip::tcp::resolver resolver_;
  std::deque<std::unique_ptr<upstream::connection>> idle_;
  std::unordered_map<uint64_t, exchange_ptr> active_;
  /// Of them, messages no one waits for (`send` without `done`).
  size_t quiet_ = 0;
  /// Ids of the channel's own exchanges (GET, DELETE): above the senders'.
  uint64_t next_own_id_ = uint64_t{1} << 63;
  std::string session_;
  std::string version_;
  /// The GET stream: wanted (after `listen`), refused by the server
  /// (405), its exchange, and the wait before it is opened again.
  bool listening_ = false;
  bool no_stream_ = false;
  uint64_t stream_id_ = 0;
  std::chrono::milliseconds stream_backoff_{1000};
  boost::asio::steady_timer stream_timer_;
  bool stopping_ = false;
};

} // namespace sluice::mcp
