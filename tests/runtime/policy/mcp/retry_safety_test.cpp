// SPEC: "A tool call is retried only when safe: the request never reached
// the server, or the tool is annotated readOnlyHint or idempotentHint;
// never otherwise."

#include "sluice/runtime/policy/mcp/retry_safety.hpp"

#include <catch2/catch.hpp>

using namespace sluice::policy::mcp;

namespace {

struct retry_case {
  delivery how_far;
  tool_hints hints;
  bool expected;
};

const char* name(delivery d) {
  switch (d) {
  case delivery::not_sent:
    return "not_sent";
  case delivery::sent:
    return "sent";
  case delivery::unknown:
    return "unknown";
  }
  return "?";
}

// {read_only, idempotent, destructive}
constexpr tool_hints plain{false, false, true};
constexpr tool_hints plain_safe{false, false, false};
constexpr tool_hints reads{true, false, false};
constexpr tool_hints reads_destructive{true, false, true};
constexpr tool_hints idem{false, true, false};
constexpr tool_hints idem_destructive{false, true, true};
constexpr tool_hints both{true, true, false};
constexpr tool_hints both_destructive{true, true, true};

} // namespace

TEST_CASE("mcp retry_safety: may_retry, case by case") {
  const retry_case cases[] = {
      // Never sent: always safe, whatever the tool does.
      {delivery::not_sent, plain, true},
      {delivery::not_sent, plain_safe, true},
      {delivery::not_sent, reads, true},
      {delivery::not_sent, reads_destructive, true},
      {delivery::not_sent, idem, true},
      {delivery::not_sent, idem_destructive, true},
      {delivery::not_sent, both, true},
      {delivery::not_sent, both_destructive, true},
      // Sent: only read-only or idempotent tools.
      {delivery::sent, plain, false},
      {delivery::sent, plain_safe, false},
      {delivery::sent, reads, true},
      {delivery::sent, reads_destructive, true},
      {delivery::sent, idem, true},
      {delivery::sent, idem_destructive, true},
      {delivery::sent, both, true},
      {delivery::sent, both_destructive, true},
      // Unknown counts as sent.
      {delivery::unknown, plain, false},
      {delivery::unknown, plain_safe, false},
      {delivery::unknown, reads, true},
      {delivery::unknown, reads_destructive, true},
      {delivery::unknown, idem, true},
      {delivery::unknown, idem_destructive, true},
      {delivery::unknown, both, true},
      {delivery::unknown, both_destructive, true},
      // MCP's defaults: neither hint, so no retry once sent.
      {delivery::sent, tool_hints{}, false},
      {delivery::unknown, tool_hints{}, false},
      {delivery::not_sent, tool_hints{}, true},
  };
  for (auto& c : cases) {
    CAPTURE(name(c.how_far), c.hints.read_only, c.hints.idempotent,
            c.hints.destructive);
    CHECK(may_retry(c.how_far, c.hints) == c.expected);
  }
}

TEST_CASE("mcp retry_safety: hints_of applies MCP's defaults to absent "
          "annotations") {
  // Defaults: readOnlyHint false, idempotentHint false, destructiveHint
  // true.
  CHECK(tool_hints{} == tool_hints{false, false, true});
  CHECK(hints_of(std::nullopt, std::nullopt, std::nullopt) ==
        tool_hints{false, false, true});
  CHECK(hints_of(true, std::nullopt, std::nullopt) ==
        tool_hints{true, false, true});
  CHECK(hints_of(std::nullopt, true, std::nullopt) ==
        tool_hints{false, true, true});
  CHECK(hints_of(std::nullopt, std::nullopt, false) ==
        tool_hints{false, false, false});
  CHECK(hints_of(false, false, true) == tool_hints{false, false, true});
  CHECK(hints_of(true, true, false) == tool_hints{true, true, false});
  CHECK(hints_of(false, std::nullopt, false) ==
        tool_hints{false, false, false});
  // What the hints mean for a sent call.
  CHECK_FALSE(
      may_retry(delivery::sent, hints_of(std::nullopt, std::nullopt, false)));
  CHECK(may_retry(delivery::sent, hints_of(std::nullopt, true, true)));
  CHECK(
      may_retry(delivery::unknown, hints_of(true, std::nullopt, std::nullopt)));
}
