// What the breaker relay's listener accepts from the shared channel, where
// anyone who may PUBLISH can write anything: only a well-formed transition
// of another node, every field checked for its type, the open period
// saturated -- and no input that throws.

#include "sluice/runtime/redis/breaker_relay.hpp"

#include <chrono>
#include <cstdint>
#include <string>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;

namespace {

std::optional<peer_message> parse(const std::string& text) {
  return parse_peer_message(text, "me");
}

} // namespace

TEST_CASE("the relay reads another node's opening and closing") {
  auto open = parse(
      R"({"node":"other","source":"a","state":"open","open_for_ms":1500})");
  REQUIRE(open);
  CHECK(open->source == "a");
  CHECK(open->to == breaker_state::open);
  CHECK(open->open_for == 1500ms);
  auto closed = parse(R"({"node":"other","source":"a","state":"closed"})");
  REQUIRE(closed);
  CHECK(closed->to == breaker_state::closed);
  CHECK(closed->open_for == 0ms);
}

TEST_CASE("the relay ignores its own messages and malformed ones") {
  CHECK_FALSE(parse(R"({"node":"me","source":"a","state":"open"})"));
  for (auto text : {
           "", "not json", "[]", "42", "null",
           R"({"source":"a","state":"open"})",
           R"({"node":null,"source":"a","state":"open"})",
           R"({"node":1,"source":"a","state":"open"})",
           R"({"node":"x","source":["a"],"state":"open"})",
           R"({"node":"x","source":"","state":"open"})",
           R"({"node":"x","source":"a","state":[]})",
           R"({"node":"x","source":"a","state":"half_open"})",
           R"({"node":"x","source":"a","state":"OPEN"})",
           R"({"node":"x","source":"a","state":"open","open_for_ms":"5"})",
           R"({"node":"x","source":"a","state":"open","open_for_ms":1e300})",
           R"({"node":"x","source":"a","state":"open","open_for_ms":1.5})",
           R"({"node":"x","source":"a","state":"open","open_for_ms":null})",
       }) {
    INFO(text);
    CHECK_NOTHROW(parse(text));
    CHECK_FALSE(parse(text));
  }
}

TEST_CASE("the relay saturates a peer's open period, never wraps it") {
  auto at = [](const std::string& ms) {
    auto m = parse(R"({"node":"x","source":"a","state":"open","open_for_ms":)" +
                   ms + "}");
    REQUIRE(m);
    return m->open_for;
  };
  auto year = std::chrono::milliseconds{max_peer_open_ms};
  CHECK(at("1000000000000") == year);      // 10^12 ms: past a year
  CHECK(at("18446744073709551615") == year); // 2^64 - 1
  CHECK(at("9223372036854775807") == year);
  CHECK(at("-5") == 0ms);
  CHECK(at("-9223372036854775808") == 0ms);
  CHECK(at("2147483648") == 2147483648ms); // past INT_MAX: not wrapped
}

TEST_CASE("the relay reads a transition's shared generation and open-until "
          "instant, and refuses malformed ones") {
  auto m = parse(R"({"node":"x","source":"a","state":"open",)"
                 R"("open_for_ms":1500,"gen":7,"until_ms":1700000000000})");
  REQUIRE(m);
  CHECK(m->node == "x");
  CHECK(m->gen == 7);
  CHECK(m->until_ms == 1700000000000);
  auto old = parse(R"({"node":"x","source":"a","state":"closed"})");
  REQUIRE(old);
  CHECK(old->gen == 0); // a node before generations: no order known
  CHECK(old->until_ms == 0);
  for (auto tail : {R"("gen":-1)", R"("gen":"7")", R"("gen":1.5)",
                    R"("gen":null)", R"("until_ms":-5)", R"("until_ms":"1")",
                    R"("until_ms":1e300)"}) {
    auto text = std::string{R"({"node":"x","source":"a","state":"open",)"} +
                tail + "}";
    INFO(text);
    CHECK_FALSE(parse(text));
  }
  auto far = parse(R"({"node":"x","source":"a","state":"open",)"
                   R"("until_ms":18446744073709551615})");
  REQUIRE(far);
  CHECK(far->until_ms == INT64_MAX); // saturated, not wrapped
}

TEST_CASE("the shared state is read with no node of its own: this node's "
          "entries too") {
  auto text = R"({"node":"me","source":"a","state":"closed","gen":3})";
  CHECK_FALSE(parse_peer_message(text, "me"));
  auto mine = parse_peer_message(text, "");
  REQUIRE(mine);
  CHECK(mine->node == "me");
  CHECK(mine->gen == 3);
}

TEST_CASE("a forged generation past 2^53 is refused: it would make a node "
          "drop every later transition of the source") {
  CHECK(parse(R"({"node":"x","source":"a","state":"open","gen":9007199254740992})"));
  CHECK_FALSE(parse(R"({"node":"x","source":"a","state":"open","gen":9007199254740993})"));
  CHECK_FALSE(parse(R"({"node":"x","source":"a","state":"open","gen":18446744073709551615})"));
}

TEST_CASE("a channel message is applied as heard only when its generation "
          "is the next one, and a jump or a repeat is read from the shared "
          "state") {
  CHECK(check_peer_gen(std::nullopt, 5) == peer_gen_check::confirm);
  CHECK(check_peer_gen(7, 3) == peer_gen_check::stale);
  CHECK(check_peer_gen(7, 6) == peer_gen_check::stale);
  CHECK(check_peer_gen(7, 8) == peer_gen_check::next);
  CHECK(check_peer_gen(7, 7) == peer_gen_check::confirm);
  CHECK(check_peer_gen(7, 9) == peer_gen_check::confirm);
  CHECK(check_peer_gen(7, uint64_t{1} << 53) == peer_gen_check::confirm);
  CHECK(check_peer_gen(UINT64_MAX, UINT64_MAX) == peer_gen_check::confirm);
}
