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

TEST_CASE("mcp retry_safety: a Streamable HTTP server's status, case by "
          "case") {
  using sluice::policy::outcome_kind;
  struct status_case {
    int status;
    bool had_session;
    bool ok;
    delivery how_far;
    outcome_kind kind;
    bool session_gone;
  };
  const status_case cases[] = {
      {200, true, true, delivery::sent, outcome_kind::transient, false},
      {202, false, true, delivery::sent, outcome_kind::transient, false},
      // Admission at the upstream: never sent, so even a tool with effects
      // may be tried again.
      {429, true, false, delivery::not_sent, outcome_kind::transient, false},
      // A session the server forgot: a new one is started.
      {404, true, false, delivery::not_sent, outcome_kind::transient, true},
      {404, false, false, delivery::not_sent, outcome_kind::transient, false},
      {408, true, false, delivery::unknown, outcome_kind::timeout, false},
      // Refusals before any tool ran: the client's error, not the server's.
      {400, true, false, delivery::not_sent, outcome_kind::permanent, false},
      {401, true, false, delivery::not_sent, outcome_kind::permanent, false},
      {403, false, false, delivery::not_sent, outcome_kind::permanent, false},
      {415, true, false, delivery::not_sent, outcome_kind::permanent, false},
      // The server failing: it may have begun the call.
      {500, true, false, delivery::unknown, outcome_kind::transient, false},
      // A proxy's 503 may come after it passed the request on.
      {503, true, false, delivery::unknown, outcome_kind::transient, false},
      {502, true, false, delivery::unknown, outcome_kind::transient, false},
      {504, true, false, delivery::unknown, outcome_kind::transient, false},
      {302, true, false, delivery::unknown, outcome_kind::transient, false},
  };
  for (auto& c : cases) {
    CAPTURE(c.status, c.had_session);
    auto v = classify_http_status(c.status, c.had_session);
    CHECK(v.ok == c.ok);
    if (c.ok)
      continue;
    CHECK(v.how_far == c.how_far);
    CHECK(v.kind == c.kind);
    CHECK(v.session_gone == c.session_gone);
  }
  // The reference server answers a session it lost with 400 "No valid
  // session ID": gone too, but only with a session and such words.
  auto lost = classify_http_status(400, true, true);
  CHECK((!lost.ok && lost.session_gone && lost.how_far == delivery::not_sent &&
         lost.kind == outcome_kind::transient));
  CHECK_FALSE(classify_http_status(400, false, true).session_gone);
  CHECK(classify_http_status(400, false, true).kind == outcome_kind::permanent);
  CHECK_FALSE(classify_http_status(400, true, false).session_gone);
  // What it means for a tool with effects: retried only when not sent.
  CHECK(may_retry(classify_http_status(429, true).how_far, tool_hints{}));
  // A 404 or 400 whose JSON-RPC error answers the request itself (and says
  // nothing of the session) is that request's refusal: the session stays.
  for (int status : {404, 400}) {
    auto own = classify_http_status(status, true, false, true);
    CHECK_FALSE(own.session_gone);
    CHECK(own.kind == outcome_kind::permanent);
    CHECK(own.how_far == delivery::not_sent);
  }
  CHECK_FALSE(may_retry(classify_http_status(500, true).how_far, tool_hints{}));
  CHECK_FALSE(may_retry(classify_http_status(503, true).how_far, tool_hints{}));
}
