// What a call used (SPEC §12): usage read from answers and usage chunks,
// usage asked of a streamed call's upstream, and the estimate before a call.

#include "sluice/actors/usage.hpp"

#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace sluice;
using json = nlohmann::json;

TEST_CASE("usage: read from a chat completion, with its cached tokens") {
  auto u = read_usage(R"({"id":"x","choices":[{"index":0,"message":{"content":
    "hi","usage":{"prompt_tokens":999}}}],"usage":{"prompt_tokens":1200,
    "completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":
    {"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":
    {"reasoning_tokens":64}}})");
  REQUIRE(u);
  CHECK(u->prompt == 1200);
  CHECK(u->completion == 300);
  CHECK(u->cached_prompt == 1024);
  CHECK_FALSE(u->estimated);
  // Embeddings: no completion tokens.
  u = read_usage(R"({"object":"list","data":[],"usage":{"prompt_tokens":8,
    "total_tokens":8}})");
  REQUIRE(u);
  CHECK(u->prompt == 8);
  CHECK(u->completion == 0);
}

TEST_CASE("usage: none without a usage object, and none from counts that "
          "are no counts or a body that is no JSON object") {
  CHECK_FALSE(read_usage(R"({"choices":[]})"));
  CHECK_FALSE(read_usage(R"({"usage":null})"));
  CHECK_FALSE(read_usage(R"({"usage":{"prompt_tokens":-5}})"));
  CHECK_FALSE(read_usage(R"({"usage":{"prompt_tokens":1.5}})"));
  CHECK_FALSE(read_usage(R"({"usage":{"prompt_tokens":"12"}})"));
  CHECK_FALSE(read_usage(R"({"usage":{"prompt_tokens":1e400}})"));
  CHECK_FALSE(read_usage(R"([{"usage":{"prompt_tokens":1}}])"));
  CHECK_FALSE(read_usage(R"({"usage":{"prompt_tokens":1})")); // cut
  CHECK_FALSE(read_usage("{\"usage\":{\"prompt_tokens\":1},\"x\":\"\xff\"}"));
  CHECK_FALSE(read_usage(""));
  // A deep nest does not exhaust anything: refused as JSON or read.
  std::string deep(100000, '[');
  CHECK_FALSE(read_usage(deep));
  // Counts beyond 64 bits are no counts either.
  CHECK_FALSE(
      read_usage(R"({"usage":{"prompt_tokens":99999999999999999999999}})"));
}

TEST_CASE("usage: the usage chunk of a stream is told from the others "
          "without parsing them") {
  CHECK(is_usage_chunk(R"({"id":"c","object":"chat.completion.chunk",
    "choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,
    "total_tokens":21}})"));
  CHECK(is_usage_chunk(R"({"choices": [], "usage" : {"prompt_tokens":1}})"));
  // The chunks before it carry "usage": null, or content.
  CHECK_FALSE(is_usage_chunk(R"({"choices":[{"index":0,"delta":{"content":
    "x"}}],"usage":null})"));
  CHECK_FALSE(is_usage_chunk(R"({"choices":[{"index":0,"delta":{"content":
    "\"usage\":{"}}]})"));
  // Usage beside content is not the gateway's chunk (some providers put
  // usage in their last content chunk): the client keeps that one.
  CHECK_FALSE(is_usage_chunk(R"({"choices":[{"index":0,"delta":{}}],
    "usage":{"prompt_tokens":1}})"));
  CHECK_FALSE(is_usage_chunk("[DONE]"));
  CHECK_FALSE(is_usage_chunk(R"({"usage":{"prompt_tokens":1}})"));
}

TEST_CASE("usage: a streamed call that did not ask for usage asks for it, "
          "and only then") {
  auto r = ask_for_usage(R"({"model":"m","stream":true,"messages":[]})");
  CHECK(r.added);
  auto doc = json::parse(r.body);
  CHECK(doc["stream_options"]["include_usage"] == true);
  CHECK(doc["model"] == "m");
  r = ask_for_usage(
      R"({"stream":true,"stream_options":{"include_usage":false,"x":1}})");
  CHECK(r.added);
  doc = json::parse(r.body);
  CHECK(doc["stream_options"]["include_usage"] == true);
  CHECK(doc["stream_options"]["x"] == 1);
  r = ask_for_usage(R"({"stream":true,"stream_options":"junk"})");
  CHECK(r.added);
  CHECK(json::parse(r.body)["stream_options"]["include_usage"] == true);
  // Already asking, not streamed, not an object: as it is.
  for (std::string body :
       {R"({"stream":true,"stream_options":{"include_usage":true}})",
        R"({"stream":false})", R"({"messages":[]})", "[1]", "not json"}) {
    r = ask_for_usage(body);
    CHECK_FALSE(r.added);
    CHECK(r.body == body);
  }
}

TEST_CASE("usage: the estimate before a call - text bytes / 4, framing per "
          "message, and the completion it may use") {
  // 40 bytes of text in two messages: 10 + 2 x 4 + 3 = 21 prompt tokens.
  auto u = estimate_request(R"({"messages":[
    {"role":"system","content":"0123456789012345678901234567890123456789"},
    {"role":"user","content":[]}],"max_tokens":100})");
  CHECK(u.estimated);
  CHECK(u.prompt == 21);
  CHECK(u.completion == 100);
  // max_completion_tokens wins over max_tokens; parts' text counts.
  u = estimate_request(R"({"messages":[{"role":"user","content":[
    {"type":"text","text":"abcde"},{"type":"image_url","image_url":{}}]}],
    "max_tokens":100,"max_completion_tokens":7})");
  CHECK(u.prompt == 2 + 4 + 3);
  CHECK(u.completion == 7);
  // Neither: the default; a negative one is no count.
  u = estimate_request(R"({"messages":[],"max_tokens":-3})");
  CHECK(u.prompt == 0);
  CHECK(u.completion == 1024);
  estimate_rules rules;
  rules.default_completion = 50;
  CHECK(estimate_request(R"({"messages":[]})", rules).completion == 50);
  // Embeddings: the input's text or tokens, nothing completed.
  u = estimate_request(R"({"input":["abcd","efgh"]})");
  CHECK(u.prompt == 2);
  CHECK(u.completion == 0);
  CHECK(estimate_request(R"({"input":[1,2,3,4,5]})").prompt == 5);
  CHECK(estimate_request(R"({"input":[[1,2],[3]]})").prompt == 3);
  // Not JSON: its bytes, and the default completion.
  u = estimate_request("0123456789");
  CHECK(u.prompt == 3);
  CHECK(u.completion == 1024);
}
