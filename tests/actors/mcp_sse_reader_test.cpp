// actors/mcp/sse_reader: a Streamable HTTP server's SSE answer read into
// its events' data, however the bytes are cut, with every event bounded.

#include "sluice/actors/mcp/sse_reader.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using sluice::mcp::sse_reader;

namespace {

std::vector<std::string> read_all(sse_reader& r, const std::string& bytes,
                                  size_t piece, size_t* most_held = nullptr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    r.feed(std::string_view{bytes}.substr(i, piece),
           [&](std::string_view data) { out.emplace_back(data); });
    if (most_held)
      *most_held = std::max(*most_held, r.pending_bytes());
  }
  return out;
}

} // namespace

TEST_CASE("mcp sse_reader: events however the bytes are cut") {
  std::string stream = ": keep-alive\n"
                       "id: 1\n"
                       "data:\n\n" // priming event: empty data, not passed on
                       "event: message\r\n"
                       "id: 2\r\n"
                       "data: {\"a\":1}\r\n\r\n"
                       "data: {\"b\":\n"
                       "data: 2}\n\n"
                       "event: other\n"
                       "data: {\"c\":3}\n\n"
                       "retry: 100\n"
                       "data:{\"d\":4}\n\n"
                       "data: {\"cut\":"; // no end: never passed on
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, stream.size()}) {
    CAPTURE(piece);
    sse_reader r{1024};
    auto got = read_all(r, stream, piece);
    REQUIRE(got.size() == 3);
    CHECK(got[0] == "{\"a\":1}");
    CHECK(got[1] == "{\"b\":\n2}");
    CHECK(got[2] == "{\"d\":4}");
    CHECK(r.last_event_id() == "2");
    CHECK(r.dropped_events() == 0);
    CHECK(r.pending_bytes() > 0);
  }
}

TEST_CASE("mcp sse_reader: an event over the limit is dropped whole, the "
          "next one read") {
  std::string big(50, 'x');
  // Two data lines that pass the limit together; one line over the line
  // limit; then a good event.
  std::string stream = "data: " + big + "\ndata: " + big + "\n\n" +
                       "data: " + std::string(100000, 'y') + "\n\n" +
                       "data: ok\n\n";
  for (size_t piece : {size_t{3}, size_t{4096}}) {
    sse_reader r{64};
    size_t most = 0;
    auto got = read_all(r, stream, piece, &most);
    REQUIRE(got.size() == 1);
    CHECK(got[0] == "ok");
    CHECK(r.dropped_events() == 2);
    // Never near the 100,000 bytes held: an event and a line at most.
    CHECK(most <= 2 * (64 + 64));
  }
}
