// One JSON-RPC 2.0 message of MCP: the one-line builders and the stdio
// line framing (the reader: mcp_jsonrpc_test.cpp).

#include "mcp_jsonrpc_shared.hpp"

#include <stdexcept>

// -- writing ------------------------------------------------------------------

TEST_CASE("mcp jsonrpc: the builders write one line of JSON-RPC") {
  CHECK(error_response("1", method_not_found, "Method not found") ==
        R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,)"
        R"("message":"Method not found"}})");
  json data{{"retry_after_ms", 250}};
  CHECK(error_response(R"("a")", tool_busy, "tool busy", &data) ==
        R"({"jsonrpc":"2.0","id":"a","error":{"code":-32016,)"
        R"("message":"tool busy","data":{"retry_after_ms":250}}})");
  CHECK(result_response("7", json{{"tools", json::array()}}) ==
        R"({"jsonrpc":"2.0","id":7,"result":{"tools":[]}})");
  CHECK(request_text("3", "tools/list", json::object()) ==
        R"({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}})");
  CHECK(request_text("3", "ping", json{}) ==
        R"({"jsonrpc":"2.0","id":3,"method":"ping"})");
  CHECK(notification_text("notifications/initialized", json{}) ==
        R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(notification_text("n", json::array({1})) ==
        R"({"jsonrpc":"2.0","method":"n","params":[1]})");
  // Params that are neither object nor array are left out.
  CHECK(notification_text("n", json(5)) == R"({"jsonrpc":"2.0","method":"n"})");
  CHECK(request_text("1", "n", json("s")) ==
        R"({"jsonrpc":"2.0","id":1,"method":"n"})");
  CHECK(internal_error == -32603);
  CHECK(invalid_params == -32602);
}

TEST_CASE("mcp jsonrpc: a builder's id is a string, an integer or null") {
  auto id_of = [](std::string_view id_json) {
    auto m = read_ok(error_response(id_json, internal_error, "x"));
    return m.id;
  };
  CHECK(id_of("42") == "42");
  CHECK(id_of("-0") == "0");
  CHECK(id_of(R"("abc")") == R"("abc")");
  CHECK(id_of(" 42 ") == "42");
  for (auto bad :
       {"", "null", "1.5", "true", "{}", "[1]", "abc", "\"open", "1 2", "\n"})
    CHECK(id_of(bad) == "null");
  CHECK(id_of(std::string(max_id_bytes + 1, '1')) == "null");
}

TEST_CASE("mcp jsonrpc: hostile text in a builder never throws nor breaks "
          "the line") {
  std::string hostile = "a\nb\r\x01\xff\xc0\xaf\"\\\xe2\x80\xa8z";
  json params{{"text", hostile}, {hostile, 1}};
  std::vector<std::string> outs{
      error_response("1", internal_error, hostile, &params),
      result_response("1", params),
      request_text("1", hostile, params),
      notification_text(hostile, params),
  };
  for (auto& out : outs) {
    CAPTURE(out);
    CHECK(out.find('\n') == std::string::npos);
    CHECK(out.find('\r') == std::string::npos);
    CHECK(std::holds_alternative<message>(read_message(out)));
  }
  auto m = read_ok(outs[2]);
  CHECK(m.what == kind::request);
  // Invalid UTF-8 became U+FFFD, the rest is as it was.
  CHECK(m.method == "a\nb\r\x01\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"\\"
                    "\xe2\x80\xa8z");
  CHECK(read_ok(outs[0]).error["message"] == m.method);
}

TEST_CASE("mcp jsonrpc: what the builders write reads back") {
  auto params = json{{"name", "echo"}, {"arguments", {{"x", {1, 2.5}}}}};
  auto m = read_ok(request_text(R"("r-1")", "tools/call", params));
  CHECK(m.what == kind::request);
  CHECK(m.id == R"("r-1")");
  CHECK(m.method == "tools/call");
  CHECK(m.params == params);
  m = read_ok(notification_text("notifications/cancelled", params));
  CHECK(m.what == kind::notification);
  CHECK(m.params == params);
  m = read_ok(result_response("9223372036854775807", params));
  CHECK(m.what == kind::response);
  CHECK(m.id == "9223372036854775807");
  CHECK(m.result == params);
  // A read error answers as an error response.
  auto e = read_bad(R"({"jsonrpc":"1.0","id":"q","method":"m"})");
  m = read_ok(error_response(e.id, e.code, e.message));
  CHECK(m.what == kind::error_response);
  CHECK(m.id == R"("q")");
  CHECK(m.error["code"] == invalid_request);
  e = read_bad("{");
  m = read_ok(error_response(e.id, e.code, e.message));
  CHECK(m.id == "null");
  CHECK(m.error["code"] == parse_error);
}

// -- stdio framing ------------------------------------------------------------

TEST_CASE("mcp jsonrpc: line_splitter cuts lines however the bytes come") {
  std::string stream = "one\ntwo\r\n\nthree\r\r\nfour";
  std::vector<std::string> expected{"one", "two", "", "three\r"};
  line_splitter whole{64};
  CHECK(split(whole, stream) == expected);
  CHECK(whole.pending_bytes() == 4); // "four", not yet ended
  CHECK(split(whole, "\n") == std::vector<std::string>{"four"});
  CHECK(whole.pending_bytes() == 0);
  // Byte by byte, the same lines.
  line_splitter bytewise{64};
  std::vector<std::string> lines;
  for (char c : stream + "\n")
    bytewise.feed(std::string_view{&c, 1},
                  [&](std::string_view l) { lines.emplace_back(l); });
  expected.push_back("four");
  CHECK(lines == expected);
  CHECK(bytewise.dropped_lines() == 0);
}

TEST_CASE("mcp jsonrpc: line_splitter drops a long line whole and picks up "
          "after its newline") {
  line_splitter s{8};
  CHECK(split(s, "12345678\n123456789\nok\n") ==
        std::vector<std::string>{"12345678", "ok"});
  CHECK(s.dropped_lines() == 1);
  // The '\r' counts: 8 bytes and '\r' are 9.
  CHECK(split(s, "12345678\r\n1234567\r\n") ==
        std::vector<std::string>{"1234567"});
  CHECK(s.dropped_lines() == 2);
  // Too long across reads: dropped once, however many reads it spans.
  CHECK(split(s, "12345").empty());
  CHECK(split(s, "6789").empty());
  CHECK(s.dropped_lines() == 3);
  CHECK(split(s, "abcdefghijklmnop").empty());
  CHECK(s.pending_bytes() == 0);
  CHECK(split(s, "qrs\nafter\n") == std::vector<std::string>{"after"});
  CHECK(s.dropped_lines() == 3);
  // No limit at all: only empty lines pass.
  line_splitter none{0};
  CHECK(split(none, "\nx\n\r\n") == std::vector<std::string>{""});
  CHECK(none.dropped_lines() == 2);
}

TEST_CASE("mcp jsonrpc: line_splitter never holds more than max_line") {
  constexpr size_t max_line = 4096;
  line_splitter s{max_line};
  // 10 MiB without a newline, in reads of 1000 bytes.
  std::string chunk(1000, 'x');
  for (int i = 0; i < 10 * 1024; ++i) {
    CHECK(split(s, chunk).empty());
    REQUIRE(s.capacity_bytes() <= max_line);
  }
  CHECK(s.dropped_lines() == 1);
  CHECK(split(s, "\n{}\n") == std::vector<std::string>{"{}"});
  // Lines of every length near the limit, cut at varying places (a fixed
  // sequence, not random).
  uint32_t rng = 12345;
  auto next = [&rng](uint32_t n) {
    rng = rng * 1103515245u + 12345u;
    return (rng >> 8) % n;
  };
  std::string stream;
  std::vector<std::string> kept;
  size_t too_long = 0;
  for (int i = 0; i < 300; ++i) {
    auto len = max_line - 50 + next(100);
    std::string line(len, static_cast<char>('a' + i % 26));
    if (len <= max_line)
      kept.push_back(line);
    else
      ++too_long;
    stream += line + "\n";
  }
  line_splitter cut{max_line};
  std::vector<std::string> lines;
  for (size_t at = 0; at < stream.size();) {
    auto n = std::min<size_t>(1 + next(3 * max_line), stream.size() - at);
    cut.feed(std::string_view{stream}.substr(at, n),
             [&](std::string_view l) { lines.emplace_back(l); });
    at += n;
    REQUIRE(cut.capacity_bytes() <= max_line);
    REQUIRE(cut.pending_bytes() <= max_line);
  }
  CHECK(too_long > 50);
  CHECK(lines == kept);
  CHECK(cut.dropped_lines() == too_long);
}

TEST_CASE("mcp jsonrpc: line_splitter after a handler throws") {
  line_splitter s{16};
  split(s, "ab");
  CHECK_THROWS_AS(
      s.feed("c\nlost\n",
             [](std::string_view) { throw std::runtime_error("handler"); }),
      std::runtime_error);
  // The held line is gone with the throw; the next bytes start afresh.
  CHECK(s.pending_bytes() == 0);
  CHECK(split(s, "next\n") == std::vector<std::string>{"next"});
}
