#pragma once

// What the JSON-RPC tests (mcp_jsonrpc_test.cpp, mcp_jsonrpc_write_test.cpp)
// share: reading a message that must (or must not) be read, nesting, lines.

#include "sluice/actors/mcp/jsonrpc.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sluice::mcp;
using json = nlohmann::json;
using kind = message::kind;

namespace mcp_jsonrpc_test {


inline message read_ok(std::string_view bytes) {
  auto r = read_message(bytes);
  if (auto e = std::get_if<read_error>(&r))
    FAIL("not read: " << e->message);
  return std::get<message>(std::move(r));
}

inline read_error read_bad(std::string_view bytes) {
  auto r = read_message(bytes);
  if (std::holds_alternative<message>(r))
    FAIL("read, though it should not be");
  return std::get<read_error>(std::move(r));
}

inline std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

/// A notification whose params hold `depth` more arrays, so the message
/// nests `depth + 2` deep (itself, params, the arrays).
inline std::string notification_nesting(size_t depth) {
  return R"({"jsonrpc":"2.0","method":"m","params":{"a":)" + nested(depth) +
         "}}";
}

inline std::vector<std::string> split(line_splitter& s, std::string_view bytes) {
  std::vector<std::string> lines;
  s.feed(bytes, [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

} // namespace mcp_jsonrpc_test

using namespace mcp_jsonrpc_test;
