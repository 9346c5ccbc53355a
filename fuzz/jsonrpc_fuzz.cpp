// Raw bytes from an MCP client or server -> the JSON-RPC reader
// (actors/mcp/jsonrpc) and the stdio line framing: never a crash, a hang, a
// stack overflow, a line past the limit, or a broken invariant; what was
// read is written again on one line and reads back the same.
//
// Input: byte 0 picks the line limit, byte 1 seeds how the rest is cut into
// reads; the rest is read whole as one message (an HTTP body) and then as
// the output of a stdio server, line by line.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/actors/mcp/jsonrpc.hpp"

namespace {

using namespace sluice::mcp;
using kind = message::kind;

void check(bool ok) {
  if (!ok)
    __builtin_trap();
}

bool one_line(const std::string& text) {
  return text.find('\n') == std::string::npos &&
         text.find('\r') == std::string::npos;
}

/// What `text` reads as: must be a message of kind `what` with id `id`.
void reads_as(const std::string& text, kind what, const std::string& id,
              message& out) {
  check(one_line(text));
  auto r = read_message(text);
  check(std::holds_alternative<message>(r));
  out = std::get<message>(std::move(r));
  check(out.what == what);
  check(out.id == id);
}

void read_one(std::string_view bytes) {
  auto r = read_message(bytes);
  message back;
  if (auto e = std::get_if<read_error>(&r)) {
    check(e->code == parse_error || e->code == invalid_request ||
          e->code == internal_error);
    check(!e->id.empty() && e->id.size() <= max_id_bytes);
    check(!e->message.empty());
    reads_as(error_response(e->id, e->code, e->message), kind::error_response,
             e->id, back);
    return;
  }
  auto& m = std::get<message>(r);
  check(m.id.size() <= max_id_bytes);
  switch (m.what) {
  case kind::request:
    check(!m.id.empty() && m.id != "null");
    check(m.params.is_null() || m.params.is_object() || m.params.is_array());
    reads_as(request_text(m.id, m.method, m.params), kind::request, m.id, back);
    check(back.method == m.method);
    check(back.params == m.params);
    // The answers to it (params as a result nest as deep as they did).
    reads_as(result_response(m.id, m.params), kind::response, m.id, back);
    check(back.result == m.params);
    reads_as(error_response(m.id, tool_busy, m.method), kind::error_response,
             m.id, back);
    break;
  case kind::notification:
    check(m.id.empty());
    reads_as(notification_text(m.method, m.params), kind::notification, "",
             back);
    check(back.method == m.method);
    check(back.params == m.params);
    break;
  case kind::response:
    check(!m.id.empty() && m.id != "null");
    reads_as(result_response(m.id, m.result), kind::response, m.id, back);
    check(back.result == m.result);
    break;
  case kind::error_response: {
    check(!m.id.empty());
    check(m.error.is_object());
    // Its data nests as deep in the answer written again.
    auto data = m.error.find("data");
    reads_as(error_response(m.id, internal_error, "x",
                            data == m.error.end() ? nullptr : &*data),
             kind::error_response, m.id, back);
    if (data != m.error.end())
      check(back.error["data"] == *data);
    break;
  }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2)
    return 0;
  const size_t limits[] = {0, 16, 1024, 65536};
  size_t max_line = limits[data[0] & 3];
  uint32_t rng = data[1] * 2654435761u + 1;
  std::string_view rest{reinterpret_cast<const char*>(data) + 2, size - 2};
  read_one(rest);
  line_splitter lines{max_line};
  size_t newlines = 0;
  for (char c : rest)
    newlines += c == '\n';
  size_t seen = 0;
  auto on_line = [&](std::string_view line) {
    ++seen;
    check(line.size() <= max_line);
    check(line.find('\n') == std::string_view::npos);
    read_one(line);
  };
  // Reads of 1..64 bytes, or larger now and then, as a pipe delivers.
  for (auto left = rest; !left.empty();) {
    rng = rng * 1103515245u + 12345u;
    size_t n = (rng >> 16) % 8 == 0 ? 4096 : 1 + (rng >> 16) % 64;
    n = n < left.size() ? n : left.size();
    lines.feed(left.substr(0, n), on_line);
    left.remove_prefix(n);
    check(lines.capacity_bytes() <= max_line);
    check(lines.pending_bytes() <= max_line);
  }
  // Every newline ends one line, passed on or dropped; a dropped line
  // may still be open at the end.
  check(seen + lines.dropped_lines() <= newlines + 1);
  check(seen <= newlines);
  return 0;
}
