#pragma once

// One JSON-RPC 2.0 message of MCP, read from bytes and written as one
// line: the bounded reader every byte from a client or an MCP server goes
// through, the builders of what the gateway sends, and the line framing of
// stdio servers. Batches are refused: MCP 2025-06-18 removed them.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::mcp {

// -- limits -------------------------------------------------------------------

/// Largest message read (a larger one is an invalid request, unread).
constexpr size_t max_message_bytes = 4 << 20;

/// Longest id, as JSON text (`"abc"` with its quotes, or `42`).
constexpr size_t max_id_bytes = 128;

/// Most arrays and objects nested in a message, the message itself counting
/// as one. Deeper is an invalid request, found while parsing: a 100,000
/// deep `[[[...` is refused after 64 of them.
constexpr int max_nesting_depth = 64;

// -- error codes --------------------------------------------------------------

/// Not JSON (invalid UTF-8 included).
constexpr int parse_error = -32700;
/// JSON, but no message of JSON-RPC 2.0 as MCP uses it.
constexpr int invalid_request = -32600;
constexpr int method_not_found = -32601;
constexpr int invalid_params = -32602;
constexpr int internal_error = -32603;
/// Sluice's own: a tool call refused for want of a permit.
constexpr int tool_busy = -32016;

// -- reading ------------------------------------------------------------------

/// One message, well formed.
struct message {
  enum class kind {
    /// A method and an id: wants an answer.
    request,
    /// A method and no id.
    notification,
    /// An id and a result.
    response,
    /// An error object and an id, or a null or absent id (the peer could
    /// not read the request's).
    error_response,
  };

  kind what = kind::notification;

  /// The id as JSON text, as `read_message` writes it again: `"abc"` or
  /// `42` (so `-0` becomes `0`); `null` for an error response without
  /// one; empty for a notification.
  std::string id;

  /// The method of a request or notification.
  std::string method;

  /// The params (an object or array), null if absent.
  nlohmann::json params;

  /// The result of a response (any value, null included).
  nlohmann::json result;

  /// The error of an error response: an object with an integer `code`
  /// and a string `message`.
  nlohmann::json error;
};

/// Why bytes are no message, ready for `error_response`.
struct read_error {
  /// `parse_error` or `invalid_request`.
  int code;
  std::string message;
  /// The id's JSON text if it could be read, else `null`.
  std::string id;
};

/// Reads one message from `bytes` (one HTTP body or one stdio line).
/// Strict: `"jsonrpc": "2.0"` exactly; an id is a string or an integer
/// (not null, a fraction, an exponent, a boolean, or an integer beyond
/// 64 bits) of at most `max_id_bytes` as text; a method is a string;
/// params are an object or an array; a message is a request, a
/// notification or a response, never two of them; no key twice in any
/// object (a filter and the server must not read different values of one
/// key); no batch; at most `max_message_bytes` and `max_nesting_depth`.
/// Members JSON-RPC does not name are ignored. Never throws for any bytes.
std::variant<message, read_error> read_message(std::string_view bytes);

// -- writing ------------------------------------------------------------------
//
// Each builder returns valid JSON on one line (no raw newline: stdio frames
// messages by newlines). Invalid UTF-8 in a string becomes U+FFFD; an
// `id_json` that is not a JSON string, integer or null of at most
// `max_id_bytes` becomes null.

/// An error response to the request with id `id_json`, `data` added to
/// the error object when given.
std::string error_response(std::string_view id_json, int code,
                           std::string_view message,
                           const nlohmann::json* data = nullptr);

/// A response to the request with id `id_json`.
std::string result_response(std::string_view id_json,
                            const nlohmann::json& result);

/// A request. `params` other than an object or an array (null) is left out.
std::string request_text(std::string_view id_json, std::string_view method,
                         const nlohmann::json& params);

/// A notification. `params` as for `request_text`.
std::string notification_text(std::string_view method,
                              const nlohmann::json& params);

// -- stdio framing ------------------------------------------------------------

/// Cuts a byte stream into lines (newline-delimited JSON, MCP's stdio
/// transport), holding at most `max_line` bytes however the stream is
/// cut: a line longer than that is dropped whole and the splitter picks up
/// again after its newline.
class line_splitter {
public:
  /// Called per complete line, without its '\n' and a '\r' before it. The
  /// view is valid during the call only.
  using line_handler = std::function<void(std::string_view)>;

  /// `max_line`: the longest line kept, in bytes before its '\n' (a '\r'
  /// before it included).
  explicit line_splitter(size_t max_line);

  /// Reads `bytes`, calling `on_line` for each line they complete (empty
  /// lines included: the caller skips them or not). An exception from
  /// `on_line` propagates; the bytes after that line are not read.
  void feed(std::string_view bytes, const line_handler& on_line);

  /// Lines dropped for being too long (counted as soon as they are).
  size_t dropped_lines() const noexcept { return dropped_; }

  /// Bytes of the unfinished line held (0 while dropping one).
  size_t pending_bytes() const noexcept { return buf_.size(); }

  /// Bytes allocated for the unfinished line: never more than `max_line`.
  size_t capacity_bytes() const noexcept { return buf_.capacity(); }

private:
  /// Appends `bytes`, growing the buffer to `max_line_` at most.
  void append(std::string_view bytes);

  size_t max_line_;
  std::vector<char> buf_;
  /// In a line already dropped: skip to its '\n'.
  bool dropping_ = false;
  size_t dropped_ = 0;
};

} // namespace sluice::mcp
