// What the node reads from a request before routing it: pure functions.

#include <string>

#include <boost/beast/http/fields.hpp>
#include <catch2/catch.hpp>

#include "sluice/runtime/node/request_reading.hpp"

using namespace sluice::node;
namespace http = boost::beast::http;

TEST_CASE("router: request paths from origin-form and absolute-form targets") {
  CHECK(request_path("/v1/x?y=1") == "/v1/x");
  CHECK(request_path("http://h:1/v1/x?y") == "/v1/x");
  CHECK(request_path("HTTPS://h") == "/");
  CHECK(request_path("http://h?q") == "/");
  CHECK_FALSE(request_path("*"));
  CHECK_FALSE(request_path("h:443"));
  CHECK_FALSE(request_path(""));
  CHECK_FALSE(request_path("ftp://h/x"));
}

TEST_CASE("router: framing errors per RFC 9112") {
  sluice::http_fields h;
  h.set(http::field::host, "x");
  CHECK_FALSE(framing_error(h, 11));
  h.set(http::field::transfer_encoding, "chunked");
  CHECK_FALSE(framing_error(h, 11));
  CHECK(framing_error(h, 10)); // no transfer codings in HTTP/1.0
  h.set(http::field::content_length, "2");
  CHECK(framing_error(h, 11));
  h.erase(http::field::content_length);
  for (auto te : {"chunked, gzip", "xchunked", "gzip", "gzip, chunked"}) {
    h.set(http::field::transfer_encoding, te);
    CHECK(framing_error(h, 11));
  }
  h.set(http::field::transfer_encoding, " Chunked ");
  CHECK_FALSE(framing_error(h, 11));
  sluice::http_fields none;
  CHECK(framing_error(none, 11));
  CHECK_FALSE(framing_error(none, 10));
  sluice::http_fields two;
  two.insert(http::field::host, "a");
  two.insert(http::field::host, "b");
  CHECK(framing_error(two, 11));
  CHECK(framing_error(two, 10));
}

TEST_CASE("router: Expect: 100-continue") {
  sluice::http_fields h;
  CHECK_FALSE(expects_continue(h, 11));
  h.set(http::field::expect, "100-Continue");
  CHECK(expects_continue(h, 11));
  CHECK_FALSE(expects_continue(h, 10));
}

TEST_CASE("router: session ids are short printable ASCII") {
  CHECK(valid_session_id("alice-1"));
  CHECK(valid_session_id(std::string(max_session_id_bytes, 'a')));
  CHECK_FALSE(valid_session_id(std::string(max_session_id_bytes + 1, 'a')));
  CHECK_FALSE(valid_session_id(""));
  CHECK_FALSE(valid_session_id("a b"));
  CHECK_FALSE(valid_session_id("\xff\xfe"));
  CHECK_FALSE(valid_session_id(std::string("a\0b", 3)));
}

TEST_CASE("router: the body is read for stream and model, with a bound") {
  auto f = inspect_body(R"({"model":"gpt-4o","stream":true,"x":[{"stream":1}]})");
  CHECK(f.error.empty());
  CHECK(f.stream);
  CHECK(f.model == "gpt-4o");
  CHECK(inspect_body(R"({"stream":null})").error.empty());
  CHECK_FALSE(inspect_body(R"({"stream":null})").stream);
  CHECK_FALSE(inspect_body(R"({"stream":"yes"})").error.empty());
  CHECK_FALSE(inspect_body(R"({"stream":{}})").error.empty());
  CHECK_FALSE(inspect_body("[]").error.empty());
  CHECK_FALSE(inspect_body("1").error.empty());
  CHECK_FALSE(inspect_body("not json").error.empty());
  CHECK_FALSE(inspect_body(R"({"a":1} x)").error.empty());
  CHECK_FALSE(inspect_body("{\"m\":\"\xff\"}").error.empty());
  std::string deep = "{\"a\":" + std::string(max_body_depth - 1, '[') +
                     std::string(max_body_depth - 1, ']') + "}";
  CHECK(inspect_body(deep).error.empty());
  std::string deeper = "{\"a\":" + std::string(max_body_depth, '[') +
                       std::string(max_body_depth, ']') + "}";
  CHECK(inspect_body(deeper).error.find("deeper") != std::string::npos);
  CHECK_FALSE(inspect_body(std::string(1000000, '[')).error.empty());
}

TEST_CASE("router: model is a string given once, stream a boolean given "
          "once") {
  // Two equal keys: parsers differ on which wins, so routing and the
  // upstream could read different models.
  auto twice = inspect_body(R"({"model":"gpt-4-expensive","model":"cheap"})");
  CHECK(twice.error == "\"model\" is given twice");
  CHECK_FALSE(twice.model);
  CHECK_FALSE(inspect_body(R"({"model":"cheap","model":{}})").error.empty());
  CHECK_FALSE(
      inspect_body(R"({"stream":false,"stream":true})").error.empty());
  for (auto bad : {R"({"model":42})", R"({"model":{}})", R"({"model":["a"]})",
                   R"({"model":true})"}) {
    INFO(bad);
    CHECK(inspect_body(bad).error == "\"model\" must be a string");
  }
  CHECK(inspect_body(R"({"model":null})").error.empty());
  CHECK_FALSE(inspect_body(R"({"model":null})").model);
  // Nested keys of the same name are someone else's.
  auto nested = inspect_body(
      R"({"model":"m","tools":[{"model":"x","stream":1}],"meta":{"model":2}})");
  CHECK(nested.error.empty());
  CHECK(nested.model == "m");
}

TEST_CASE("router: model ids in a path are percent-decoded") {
  CHECK(percent_decode("meta-llama%2FLlama-3") == "meta-llama/Llama-3");
  CHECK(percent_decode("gpt-4o") == "gpt-4o");
  CHECK(percent_decode("a%2fb%2F") == "a/b/");
  CHECK(percent_decode("") == "");
  CHECK_FALSE(percent_decode("%"));
  CHECK_FALSE(percent_decode("%2"));
  CHECK_FALSE(percent_decode("a%zz"));
  CHECK_FALSE(percent_decode("a%0Ab")); // a control character
  CHECK_FALSE(percent_decode("a%00"));
}

TEST_CASE("router: a top-level model or stream in another case is refused") {
  // Issue 30 finding 3: a key limited to gpt-4o* sent {"model":"gpt-4o",
  // "Model":"gpt-5"}; routing read "model", an upstream reading keys
  // case-insensitively (Go's encoding/json) read the last match, gpt-5.
  for (auto bad :
       {R"({"model":"gpt-4o","Model":"gpt-5"})",
        R"({"MODEL":"gpt-5","model":"gpt-4o"})", R"({"Model":"gpt-5"})",
        R"({"mOdEl":"gpt-5"})", R"({"model":"m","stream":false,"Stream":true})",
        R"({"STREAM":true})",
        // U+017F (long s): Go's case folding takes it for 's'.
        "{\"model\":\"m\",\"\xc5\xbftream\":true}",
        // \u escapes are the same key once decoded.
        R"({"model":"m","\u004dodel":"gpt-5"})"}) {
    INFO(bad);
    auto f = inspect_body(bad);
    CHECK(f.error.find("in another case") != std::string::npos);
    CHECK_FALSE(f.model);
    CHECK_FALSE(f.stream);
  }
  auto named = inspect_body(R"({"model":"gpt-4o","Model":"gpt-5"})");
  CHECK(named.error.rfind("\"Model\" is \"model\" in another case", 0) == 0);
  // Only top-level keys route; nested ones and other keys pass.
  for (auto ok : {R"({"model":"m","meta":{"Model":"x","STREAM":1}})",
                  R"({"model":"m","models":["x"],"modell":1,"Streams":2})",
                  R"({"model":"m","mode":"x","\u212aey":1})"}) {
    INFO(ok);
    auto f = inspect_body(ok);
    CHECK(f.error.empty());
    CHECK(f.model == "m");
  }
}
