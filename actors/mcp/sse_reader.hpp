#pragma once

// Reading a Server-Sent Events stream (the answer of a Streamable HTTP MCP
// server that streams, and its GET stream) into the events' data, however
// the bytes are cut, holding at most `max_event` bytes of one event: a
// longer event is dropped whole. Pure; lines end in LF or CRLF (a lone CR
// is read as part of its line).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "sluice/actors/mcp/jsonrpc.hpp"

namespace sluice::mcp {

class sse_reader {
public:
  /// Called per complete event of type `message` (the default) that has
  /// data: its data lines joined by '\n'. Valid during the call only.
  using event_handler = std::function<void(std::string_view data)>;

  explicit sse_reader(size_t max_event);

  /// Reads `bytes`, calling `on_event` for each event they complete.
  void feed(std::string_view bytes, const event_handler& on_event);

  /// Events dropped for being over `max_event` bytes.
  size_t dropped_events() const noexcept;

  /// The last `id:` field seen (for a client that resumes; empty: none).
  const std::string& last_event_id() const noexcept { return last_id_; }

  /// Bytes held for the event and line not yet complete.
  size_t pending_bytes() const noexcept {
    return data_.size() + lines_.pending_bytes();
  }

private:
  void on_line(std::string_view line, const event_handler& on_event);

  size_t max_event_;
  line_splitter lines_;
  std::string data_;
  std::string type_;
  std::string last_id_;
  bool has_data_ = false;
  bool over_ = false;
  size_t dropped_ = 0;
  size_t lines_dropped_ = 0;
};

} // namespace sluice::mcp
