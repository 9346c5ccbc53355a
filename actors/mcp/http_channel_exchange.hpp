#pragma once

// Private to the HTTP channel (http_channel.cpp: the channel's life,
// http_channel_exchange.cpp: one exchange): what both halves share.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/mcp/http_channel.hpp"
#include "sluice/actors/mcp/sse_reader.hpp"
#include "sluice/actors/upstream/connection.hpp"
#include "sluice/actors/upstream/response.hpp"

namespace sluice::mcp::http_detail {

enum method_kind : int { post_message, get_stream, delete_session };

/// The longest wait before the GET stream is opened again.
constexpr std::chrono::milliseconds max_stream_backoff{30000};

log_limit& http_log_limit();

/// Visible ASCII, 1 to `max_session_id_bytes` bytes.
bool valid_session_id(std::string_view id);

bool starts_with_nocase(std::string_view s, std::string_view prefix);

/// A 400's JSON-RPC error message speaks of the session ("No valid
/// session ID provided").
bool speaks_of_session(const std::string& body);

/// Whether an error status's body is a JSON-RPC error answering a request
/// (its id, not null): that request's own refusal.
bool answers_a_request(const std::string& body);

} // namespace sluice::mcp::http_detail

namespace sluice::mcp {

struct http_channel::exchange {
  uint64_t id = 0;
  int method = http_detail::post_message;
  send_done done;
  /// False once it ended (answered, failed, cancelled): its handlers that
  /// still run do nothing.
  bool live = true;
  std::unique_ptr<upstream::connection> conn;
  boost::beast::http::request<boost::beast::http::string_body> req;
  std::optional<upstream::response_reader> reader;
  std::optional<sse_reader> sse;
  std::string json;
  bool json_over = false;
  bool written = false;
  bool header_seen = false;
  bool had_session = false;
  /// Counted in `quiet_` (sent with no `done`).
  bool quiet = false;
  std::optional<boost::asio::steady_timer> connect_timer;
  std::optional<boost::asio::steady_timer> deadline;
};

} // namespace sluice::mcp
