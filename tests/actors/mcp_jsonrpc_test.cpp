// One JSON-RPC 2.0 message of MCP: the bounded reader against hostile
// bytes, the one-line builders, and the stdio line framing.

#include "sluice/actors/mcp/jsonrpc.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sluice::mcp;
using json = nlohmann::json;
using kind = message::kind;

namespace {

message read_ok(std::string_view bytes) {
  auto r = read_message(bytes);
  if (auto e = std::get_if<read_error>(&r))
    FAIL("not read: " << e->message);
  return std::get<message>(std::move(r));
}

read_error read_bad(std::string_view bytes) {
  auto r = read_message(bytes);
  if (std::holds_alternative<message>(r))
    FAIL("read, though it should not be");
  return std::get<read_error>(std::move(r));
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

/// A notification whose params hold `depth` more arrays, so the message
/// nests `depth + 2` deep (itself, params, the arrays).
std::string notification_nesting(size_t depth) {
  return R"({"jsonrpc":"2.0","method":"m","params":{"a":)" + nested(depth) +
         "}}";
}

std::vector<std::string> split(line_splitter& s, std::string_view bytes) {
  std::vector<std::string> lines;
  s.feed(bytes, [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

} // namespace

// -- reading well-formed messages ---------------------------------------------

TEST_CASE("mcp jsonrpc: reads requests and notifications") {
  auto m = read_ok(R"({"jsonrpc":"2.0","id":1,"method":"tools/call",
                       "params":{"name":"echo","arguments":{"x":1}}})");
  CHECK(m.what == kind::request);
  CHECK(m.id == "1");
  CHECK(m.method == "tools/call");
  CHECK(m.params["name"] == "echo");
  CHECK(m.result.is_null());
  CHECK(m.error.is_null());
  m = read_ok(R"({"method":"ping","id":"abc","jsonrpc":"2.0"})");
  CHECK(m.what == kind::request);
  CHECK(m.id == R"("abc")");
  CHECK(m.params.is_null());
  // The id is written again: escapes become what they stand for.
  m = read_ok(R"({"jsonrpc":"2.0","id":"a\u0041\"","method":"m"})");
  CHECK(m.id == R"("aA\"")");
  m = read_ok(R"({"jsonrpc":"2.0","id":-5,"method":"m","params":[1,2]})");
  CHECK(m.id == "-5");
  CHECK(m.params == json::array({1, 2}));
  m = read_ok(R"({"jsonrpc":"2.0","id":18446744073709551615,"method":"m"})");
  CHECK(m.id == "18446744073709551615");
  m = read_ok(R"({"jsonrpc":"2.0","id":"","method":""})");
  CHECK(m.id == R"("")");
  m = read_ok(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  CHECK(m.what == kind::notification);
  CHECK(m.id.empty());
  CHECK(m.method == "notifications/initialized");
  m = read_ok(" \r\n\t{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{},"
              "\"extra\":[1]}\n ");
  CHECK(m.what == kind::notification);
  CHECK(m.params == json::object());
}

TEST_CASE("mcp jsonrpc: reads responses and error responses") {
  auto m = read_ok(R"({"jsonrpc":"2.0","id":7,"result":{"tools":[]}})");
  CHECK(m.what == kind::response);
  CHECK(m.id == "7");
  CHECK(m.result == json{{"tools", json::array()}});
  CHECK(m.method.empty());
  // Any value is a result, null too.
  m = read_ok(R"({"jsonrpc":"2.0","id":"r","result":null})");
  CHECK(m.what == kind::response);
  CHECK(m.result.is_null());
  m = read_ok(R"({"jsonrpc":"2.0","id":8,"error":{"code":-32601,
                  "message":"Method not found","data":{"m":"x"}}})");
  CHECK(m.what == kind::error_response);
  CHECK(m.id == "8");
  CHECK(m.error["code"] == -32601);
  CHECK(m.error["data"]["m"] == "x");
  // A peer that could not read the id answers with null or none.
  m = read_ok(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,
                  "message":"Parse error"}})");
  CHECK(m.what == kind::error_response);
  CHECK(m.id == "null");
  m = read_ok(R"({"jsonrpc":"2.0","error":{"code":1,"message":""}})");
  CHECK(m.what == kind::error_response);
  CHECK(m.id == "null");
}

// -- parse errors -------------------------------------------------------------

TEST_CASE("mcp jsonrpc: bytes that are no JSON are a parse error") {
  std::vector<std::string> cases{
      "",
      "   \r\n\t ",
      "{",
      R"({"jsonrpc":"2.0",)",
      R"({"jsonrpc":"2.0","id":1,"method":"m"} x)",
      R"({"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"m"})",
      R"({"jsonrpc":"2.0","method":"m" /* comment */})",
      "{'jsonrpc':'2.0'}",
      // Invalid UTF-8: a lone continuation byte, an overlong '/', a cut
      // sequence, a surrogate encoded directly, bytes outside a string.
      "{\"jsonrpc\":\"2.0\",\"method\":\"\x80\"}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xc0\xaf\"}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xe2\x82\"}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xa0\x80\"}",
      "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\xff",
      "\xef\xbb\xbf\xff{}",
      // A lone surrogate escape, a raw control character in a string.
      R"({"jsonrpc":"2.0","method":"\ud800"})",
      "{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}",
      std::string("{\"jsonrpc\":\"2.0\",\"method\":\"a\0b\"}", 33),
      std::string("\0", 1),
      // An unterminated string to the end of a large body.
      "{\"a\":\"" + std::string(1 << 20, 'x'),
  };
  for (auto& bytes : cases) {
    CAPTURE(bytes.substr(0, 80));
    auto e = read_bad(bytes);
    CHECK(e.code == parse_error);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::StartsWith("Parse error"));
  }
}

// -- invalid requests ---------------------------------------------------------

TEST_CASE("mcp jsonrpc: JSON that is no message object is an invalid "
          "request") {
  for (auto bytes : {"42", R"("str")", "null", "true", "-0"}) {
    CAPTURE(bytes);
    auto e = read_bad(bytes);
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("not an object"));
  }
  for (auto bytes : {"[]", R"([{"jsonrpc":"2.0","id":1,"method":"m"}])",
                     R"([{"jsonrpc":"2.0","id":1,"method":"m"},
            {"jsonrpc":"2.0","id":2,"method":"m"}])"}) {
    CAPTURE(bytes);
    auto e = read_bad(bytes);
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("batches are not supported"));
  }
}

TEST_CASE("mcp jsonrpc: jsonrpc must be exactly \"2.0\", and the error "
          "names the id") {
  for (auto bytes :
       {R"({"jsonrpc":"1.0","id":1,"method":"m"})", R"({"id":1,"method":"m"})",
        R"({"jsonrpc":2.0,"id":1,"method":"m"})",
        R"({"jsonrpc":"2.0 ","id":1,"method":"m"})",
        R"({"jsonrpc":null,"id":1,"method":"m"})",
        R"({"jsonrpc":["2.0"],"id":1,"method":"m"})"}) {
    CAPTURE(bytes);
    auto e = read_bad(bytes);
    CHECK(e.code == invalid_request);
    CHECK(e.id == "1");
    CHECK_THAT(e.message, Catch::Contains(R"("jsonrpc" must be "2.0")"));
  }
  auto e = read_bad(R"({"jsonrpc":"1.0","id":"x","method":"m"})");
  CHECK(e.id == R"("x")");
  e = read_bad(R"({"jsonrpc":"1.0","method":"m"})");
  CHECK(e.id == "null");
}

TEST_CASE("mcp jsonrpc: an id is a string or an integer") {
  for (auto id :
       {"null", "1.5", "1.0", "1e2", "true", "false", "{}", R"({"a":1})", "[]",
        "[1]", "99999999999999999999999", "-99999999999999999999"}) {
    CAPTURE(id);
    auto e = read_bad(std::string{R"({"jsonrpc":"2.0","id":)"} + id +
                      R"(,"method":"m"})");
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("id must be a string or an integer"));
  }
  // A number no double holds is refused before the id is looked at.
  for (auto id : {"1e400", "-1e400"}) {
    CAPTURE(id);
    auto e = read_bad(std::string{R"({"jsonrpc":"2.0","id":)"} + id +
                      R"(,"method":"m"})");
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("a number is out of range"));
  }
  auto e = read_bad("1e400");
  CHECK(e.code == invalid_request);
  CHECK_THAT(e.message, Catch::Contains("a number is out of range"));
  e = read_bad(R"({"jsonrpc":"2.0","method":"m","params":[1e999]})");
  CHECK(e.code == invalid_request);
  // -0 is the integer 0 (JavaScript's -0 === 0 as well).
  auto m = read_ok(R"({"jsonrpc":"2.0","id":-0,"method":"m"})");
  CHECK(m.what == kind::request);
  CHECK(m.id == "0");
  // A response's id is checked the same way.
  e = read_bad(R"({"jsonrpc":"2.0","id":1.5,"result":{}})");
  CHECK(e.code == invalid_request);
  e = read_bad(R"({"jsonrpc":"2.0","id":null,"result":{}})");
  CHECK(e.code == invalid_request);
  e = read_bad(R"({"jsonrpc":"2.0","id":null,"method":"m"})");
  CHECK(e.code == invalid_request);
  e = read_bad(R"({"jsonrpc":"2.0","id":true,"error":{"code":1,
                   "message":"x"}})");
  CHECK(e.code == invalid_request);
}

TEST_CASE("mcp jsonrpc: an id is at most 128 bytes as text") {
  auto with_id = [](const std::string& id) {
    return R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":"m"})";
  };
  auto longest = "\"" + std::string(max_id_bytes - 2, 'i') + "\"";
  CHECK(read_ok(with_id(longest)).id == longest);
  for (auto& id : {"\"" + std::string(max_id_bytes - 1, 'i') + "\"",
                   "\"" + std::string(1 << 20, 'i') + "\"",
                   // Short in bytes, long as text: 30 escapes of 6 bytes.
                   "\"" + std::string(30 * 1, '\x1f') + "\""}) {
    CAPTURE(id.size());
    auto text = id;
    if (text[1] == '\x1f') {
      // Raw control characters are no JSON: escape them.
      text = "\"";
      for (int i = 0; i < 30; ++i)
        text += "\\u001f";
      text += "\"";
    }
    auto e = read_bad(with_id(text));
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("longer than 128 bytes"));
  }
}

TEST_CASE("mcp jsonrpc: method, params, result and error are checked") {
  struct bad {
    const char* bytes;
    const char* why;
    const char* id;
  };
  const bad cases[] = {
      {R"({"jsonrpc":"2.0","id":1,"method":42})", "method must be a string",
       "1"},
      {R"({"jsonrpc":"2.0","id":1,"method":null})", "method must be a string",
       "1"},
      {R"({"jsonrpc":"2.0","method":["m"]})", "method must be a string",
       "null"},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","params":"x"})",
       "params must be an object or an array", "1"},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","params":null})",
       "params must be an object or an array", "1"},
      {R"({"jsonrpc":"2.0","id":"p","method":"m","params":3})",
       "params must be an object or an array", R"("p")"},
      {R"({"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,
        "message":"x"}})",
       "both result and error", "1"},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","result":1})",
       "a method and a result or error", "1"},
      {R"({"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,
        "message":"x"}})",
       "a method and a result or error", "1"},
      {R"({"jsonrpc":"2.0","id":1})", "neither a method nor a result or error",
       "1"},
      {R"({"jsonrpc":"2.0"})", "neither a method nor a result or error",
       "null"},
      {R"({"jsonrpc":"2.0","result":{}})", "a response needs an id", "null"},
      {R"({"jsonrpc":"2.0","id":1,"error":"bad"})", "error must be an object",
       "1"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"x"}})",
       "error must be an object", "1"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"x"}})",
       "error must be an object", "1"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1}})",
       "error must be an object", "1"},
      {R"({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}})",
       "error must be an object", "1"},
  };
  for (auto& c : cases) {
    CAPTURE(c.bytes);
    auto e = read_bad(c.bytes);
    CHECK(e.code == invalid_request);
    CHECK_THAT(e.message, Catch::Contains(c.why));
    CHECK(e.id == c.id);
  }
}

TEST_CASE("mcp jsonrpc: a key twice in any object is an invalid request") {
  for (auto bytes :
       {R"({"jsonrpc":"2.0","id":1,"method":"a","method":"b"})",
        R"({"jsonrpc":"2.0","id":1,"id":2,"method":"m"})",
        R"({"jsonrpc":"2.0","jsonrpc":"2.0","method":"m"})",
        // A filter reading one name and a server the other.
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"safe","name":"rm_rf"}})",
        R"({"jsonrpc":"2.0","method":"m","params":[{"a":[{"k":1,"k":1}]}]})",
        R"({"jsonrpc":"2.0","method":"m","params":{"":1,"":2}})"}) {
    CAPTURE(bytes);
    auto e = read_bad(bytes);
    CHECK(e.code == invalid_request);
    CHECK_THAT(e.message, Catch::Contains("a key appears twice"));
  }
  // The same key in different objects is fine.
  auto m = read_ok(R"({"jsonrpc":"2.0","method":"m","params":{"a":{"k":1},
                       "b":{"k":2},"c":[{"k":3},{"k":4}],"k":5}})");
  CHECK(m.params["c"][1]["k"] == 4);
}

TEST_CASE("mcp jsonrpc: at most 4 MiB") {
  std::string head = R"({"jsonrpc":"2.0","method":"m","params":{"p":")";
  std::string tail = "\"}}";
  auto of_size = [&](size_t n) {
    return head + std::string(n - head.size() - tail.size(), 'x') + tail;
  };
  auto m = read_ok(of_size(max_message_bytes));
  CHECK(m.params["p"].get_ref<const std::string&>().size() ==
        max_message_bytes - head.size() - tail.size());
  for (size_t n : {max_message_bytes + 1, size_t{5} << 20}) {
    CAPTURE(n);
    auto e = read_bad(of_size(n));
    CHECK(e.code == invalid_request);
    CHECK(e.id == "null");
    CHECK_THAT(e.message, Catch::Contains("larger than 4194304 bytes"));
  }
  // Refused before it is parsed: 5 MiB of garbage is no parse error.
  auto e = read_bad(std::string(size_t{5} << 20, '['));
  CHECK(e.code == invalid_request);
  CHECK_THAT(e.message, Catch::Contains("larger than"));
}

TEST_CASE("mcp jsonrpc: at most 64 arrays and objects nested") {
  auto m = read_ok(notification_nesting(max_nesting_depth - 2));
  CHECK(m.what == kind::notification);
  auto e = read_bad(notification_nesting(max_nesting_depth - 1));
  CHECK(e.code == invalid_request);
  CHECK_THAT(e.message, Catch::Contains("nested deeper than 64"));
  // 100,000 deep: an error, not a stack overflow; closed or not, arrays
  // or objects.
  for (auto& bytes : {std::string(100000, '['), nested(100000),
                      [] {
                        std::string s;
                        for (int i = 0; i < 100000; ++i)
                          s += R"({"a":)";
                        return s;
                      }(),
                      R"({"jsonrpc":"2.0","id":1,"method":"m","params":)" +
                          nested(100000) + "}"}) {
    auto e = read_bad(bytes);
    CHECK(e.code == invalid_request);
    CHECK_THAT(e.message, Catch::Contains("nested deeper than 64"));
  }
}

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
