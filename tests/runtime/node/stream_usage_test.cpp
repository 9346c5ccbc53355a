// A streamed answer's usage on its way to the client (SPEC §12): read,
// and taken out when the gateway asked for it, however the upstream's
// pieces cut the events.

#include "sluice/runtime/node/stream_usage.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

using namespace sluice::node;

namespace {

const std::string chunk1 =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
    "\"Hi\"}}],\"usage\":null}\n\n";
const std::string chunk2 =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},"
    "\"finish_reason\":\"stop\"}],\"usage\":null}\n\n";
const std::string usage_chunk =
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":2,\"total_tokens\":11,\"prompt_tokens_details\":"
    "{\"cached_tokens\":4}}}\n\n";
const std::string done = "data: [DONE]\n\n";

// The stream cut into pieces of `size` bytes, fed one by one.
std::string relay(stream_usage& s, const std::string& stream, size_t size) {
  std::string out;
  for (size_t i = 0; i < stream.size(); i += size) {
    std::string piece = stream.substr(i, size);
    s.feed(piece);
    out += piece;
  }
  return out + s.flush();
}

std::string without_null_usage(std::string chunk) {
  auto at = chunk.find(",\"usage\":null");
  chunk.erase(at, 13);
  return chunk;
}

} // namespace

TEST_CASE("stream usage: asked for by the gateway, the usage chunk and the "
          "null usage are taken out, whatever the pieces") {
  const std::string stream = chunk1 + chunk2 + usage_chunk + done;
  const std::string expected =
      without_null_usage(chunk1) + without_null_usage(chunk2) + done;
  for (size_t size : {stream.size(), size_t{1}, size_t{2}, size_t{7},
                      size_t{64}, chunk1.size(), chunk1.size() + 1}) {
    INFO("pieces of " << size);
    stream_usage s{true};
    CHECK(relay(s, stream, size) == expected);
    REQUIRE(s.usage());
    CHECK(s.usage()->prompt == 9);
    CHECK(s.usage()->completion == 2);
    CHECK(s.usage()->cached_prompt == 4);
  }
}

TEST_CASE("stream usage: asked for by the client, the stream passes "
          "unchanged, piece for piece, and its usage is read") {
  const std::string stream = chunk1 + chunk2 + usage_chunk + done;
  for (size_t size : {stream.size(), size_t{1}, size_t{5}, size_t{100}}) {
    stream_usage s{false};
    std::string out;
    for (size_t i = 0; i < stream.size(); i += size) {
      std::string piece = stream.substr(i, size);
      const std::string sent = piece;
      s.feed(piece);
      CHECK(piece == sent); // nothing held back, nothing changed
      out += piece;
    }
    CHECK(s.flush().empty());
    CHECK(out == stream);
    REQUIRE(s.usage());
    CHECK(s.usage()->prompt == 9);
  }
}

TEST_CASE("stream usage: CRLF events, a last event without its blank line, "
          "and a stream with no usage at all") {
  stream_usage s{true};
  std::string crlf = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
                     "\"completion_tokens\":1}}\r\n\r\ndata: [DONE]\r\n\r\n";
  CHECK(relay(s, crlf, 3) == "data: [DONE]\r\n\r\n");
  CHECK(s.usage()->prompt == 1);
  stream_usage cut{true};
  std::string no_end = chunk1 + "data: {\"choices\":[],\"usage\":"
                                "{\"prompt_tokens\":5}}";
  CHECK(relay(cut, no_end, 10) == without_null_usage(chunk1));
  CHECK(cut.usage()->prompt == 5);
  stream_usage none{true};
  std::string plain = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}"
                      "\n\n" +
                      done;
  CHECK(relay(none, plain, 4) == plain);
  CHECK_FALSE(none.usage());
}

TEST_CASE("stream usage: an event longer than the hold limit passes as it "
          "comes, and what is held never exceeds the limit") {
  std::string big = "data: {\"choices\":[{\"delta\":{\"content\":\"" +
                    std::string(3 * max_held_event_bytes, 'x') +
                    "\"}}],\"usage\":null}\n\n";
  std::string stream = big + usage_chunk + done;
  for (bool strip : {true, false})
    for (size_t size : {size_t{4096}, size_t{4095}, size_t{1000}, size_t{3}}) {
      INFO((strip ? "strip" : "read") << ", pieces of " << size);
      stream_usage s{strip};
      std::string out;
      size_t most_held = 0;
      for (size_t i = 0; i < stream.size(); i += size) {
        std::string piece = stream.substr(i, size);
        size_t in = piece.size();
        s.feed(piece);
        out += piece;
        most_held = std::max(most_held, i + in - out.size());
      }
      out += s.flush();
      CHECK(most_held <= max_held_event_bytes + size);
      // The big event passed unread (its null usage stays); the usage
      // chunk after it was still read, and taken out when stripping.
      CHECK(out == (strip ? big + done : stream));
      REQUIRE(s.usage());
      CHECK(s.usage()->prompt == 9);
    }
}

TEST_CASE("stream usage: the blank line ending a long event may be cut "
          "between two pieces") {
  std::string big = "data: {\"choices\":[{\"delta\":{\"content\":\"" +
                    std::string(2 * max_held_event_bytes, 'y') + "\"}}]}\n\n";
  for (bool strip : {true, false})
    for (size_t cut : {size_t{1}, size_t{2}}) {
      INFO((strip ? "strip" : "read") << ", cut " << cut << " before its end");
      stream_usage s{strip};
      std::string a = big.substr(0, big.size() - cut);
      std::string b = big.substr(big.size() - cut) + usage_chunk + done;
      std::string out;
      s.feed(a);
      out += a;
      s.feed(b);
      out += b;
      out += s.flush();
      CHECK(out == (strip ? big + done : big + usage_chunk + done));
      REQUIRE(s.usage());
      CHECK(s.usage()->prompt == 9);
    }
}

TEST_CASE("stream usage: null usage is taken out at the top level only") {
  std::string a = R"({"usage":null,"id":"x"})";
  drop_null_usage(a);
  CHECK(a == R"({"id":"x"})");
  std::string b = R"({"id":"x", "usage" : null})";
  drop_null_usage(b);
  CHECK(b == R"({"id":"x"})");
  std::string c = R"({"choices":[{"usage":null}],"text":"\"usage\":null"})";
  drop_null_usage(c);
  CHECK(c == R"({"choices":[{"usage":null}],"text":"\"usage\":null"})");
  std::string d = R"({"usage":{"prompt_tokens":1}})";
  drop_null_usage(d);
  CHECK(d == R"({"usage":{"prompt_tokens":1}})");
  std::string e = R"({"usage":null})";
  drop_null_usage(e);
  CHECK(e == "{}");
}
