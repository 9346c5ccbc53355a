// The recent breaker transitions an /events snapshot replays: oldest first,
// bounded by count and by age.

#include "sluice/runtime/node/event_hub.hpp"

#include <string>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using sluice::node::transition_log;

TEST_CASE("transition log: a JSON array of the recent transitions") {
  transition_log log;
  transition_log::clock::time_point t0{};
  CHECK(log.json_array(t0) == "[]");
  log.add(R"({"generation":2})", t0);
  log.add(R"({"generation":3})", t0 + 1s);
  CHECK(log.json_array(t0 + 2s) == R"([{"generation":2},{"generation":3}])");
  // Ten minutes on, the first is too old; the second just is not.
  CHECK(log.json_array(t0 + 10min + 500ms) == R"([{"generation":3}])");
  CHECK(log.json_array(t0 + 11min) == "[]");
}

TEST_CASE("transition log: at most max_entries, the oldest dropped first") {
  transition_log log;
  transition_log::clock::time_point t0{};
  for (size_t i = 0; i < transition_log::max_entries + 10; ++i)
    log.add(std::to_string(i), t0);
  auto text = log.json_array(t0);
  CHECK(text.rfind("[10,11,", 0) == 0);
  CHECK(text.size() > 2);
  CHECK(text.find(',' + std::to_string(transition_log::max_entries + 9) + ']') !=
        std::string::npos);
}

TEST_CASE("transition log: the array fits its byte budget") {
  transition_log log;
  transition_log::clock::time_point t0{};
  // Transitions of a source with a 1000-byte name: the newest that fit.
  std::string big(1000, 'x');
  for (int i = 0; i < 200; ++i)
    log.add("\"" + big + std::to_string(i) + "\"", t0);
  auto text = log.json_array(t0);
  CHECK(text.size() <= transition_log::max_bytes);
  CHECK(text.size() > transition_log::max_bytes - 1100);
  CHECK(text.find(big + "199\"]") != std::string::npos); // the newest kept
  CHECK(text.find(big + "0\"") == std::string::npos);    // the oldest not
}
