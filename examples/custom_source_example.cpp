// Extending Sluice with your own source: a source is any actor that answers
// `(attempt_atom, call_request) -> source_reply` (messages/source.hpp). This
// one is a tiny "tool server" that upper-cases its payload and pushes back
// with 429 (and a Retry-After hint) on every fourth attempt. Register it with
// the runtime and it gets admission, a breaker, AIMD and the two-budget
// governor for free.
//
// It answers at once, so it has nothing to abandon when a call is cancelled;
// a source that works longer should monitor each requester and drop the
// attempt on its down message (see actors/simulated_source.cpp).

#include <cctype>
#include <cstdio>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <fmt/core.h>

#include "sluice/messages/errors.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/runtime.hpp"

using namespace std::chrono_literals;

namespace {

struct upper_tool_state {
  int attempts = 0;

  static inline const char* name = "example.upper_tool";
};

sluice::source_actor::behavior_type
upper_tool(sluice::source_actor::stateful_pointer<upper_tool_state> self) {
  return {
      [self](sluice::attempt_atom, const sluice::call_request& request) {
        sluice::source_reply reply;
        if (++self->state.attempts % 4 == 0) {
          reply.kind = sluice::policy::outcome_kind::rate_limited;
          reply.status = 429;
          reply.retry_after = 100ms;
          return reply;
        }
        reply.kind = sluice::policy::outcome_kind::ok;
        reply.status = 200;
        reply.body = request.payload;
        for (auto& c : reply.body)
          c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return reply;
      },
  };
}

} // namespace

int main() {
  caf::actor_system_config caf_cfg;
  sluice::add_error_category(caf_cfg);
  caf::actor_system sys{caf_cfg};

  sluice::runtime_config cfg;
  cfg.kinds["tools"].backoff = {20ms, 200ms, 0.0};
  sluice::runtime rt{sys, cfg};
  rt.add_source("upper", sys.spawn(upper_tool));
  rt.add_route({"tools/upper", "tools", {"upper"}, {}, {}});

  int ok = 0;
  size_t rate_limited = 0;
  for (auto word : {"sluice", "governs", "calls", "to", "flaky", "tools"}) {
    auto r = rt.call(sluice::call_request{"tools/upper", word}).get();
    if (r.ok())
      ++ok;
    for (auto& a : r.attempts)
      if (a.kind == sluice::policy::outcome_kind::rate_limited)
        ++rate_limited;
    fmt::print("{:<8} -> {:<8} ({}, {} attempt(s))\n", word, r.body,
               sluice::to_string(r.status), r.attempts.size());
  }
  fmt::print("{} of 6 answered; {} attempt(s) were rate limited and retried "
             "after the hint\n",
             ok, rate_limited);
  std::fflush(stdout);
  return ok == 6 && rate_limited > 0 ? 0 : 1;
}
