// One JSON-RPC 2.0 message of MCP: the bounded reader against hostile
// bytes (the builders and the stdio framing: mcp_jsonrpc_write_test.cpp).

#include "mcp_jsonrpc_shared.hpp"

#include <stdexcept>


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

