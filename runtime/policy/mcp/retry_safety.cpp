#include "sluice/runtime/policy/mcp/retry_safety.hpp"

namespace sluice::policy::mcp {

tool_hints hints_of(std::optional<bool> read_only,
                    std::optional<bool> idempotent,
                    std::optional<bool> destructive) noexcept {
  tool_hints defaults;
  return {read_only.value_or(defaults.read_only),
          idempotent.value_or(defaults.idempotent),
          destructive.value_or(defaults.destructive)};
}

bool may_retry(delivery how_far, const tool_hints& hints) noexcept {
  switch (how_far) {
  case delivery::not_sent:
    return true;
  case delivery::sent:
  case delivery::unknown:
    return hints.read_only || hints.idempotent;
  }
  return false;
}

http_status_verdict classify_http_status(int status, bool had_session,
                                         bool about_session,
                                         bool own_error) noexcept {
  http_status_verdict v;
  if (status >= 200 && status < 300)
    return v;
  v.ok = false;
  if (status == 429) {
    v.how_far = delivery::not_sent;
  } else if (!own_error && (status == 404 ||
                            (status == 400 && had_session && about_session))) {
    v.how_far = delivery::not_sent;
    v.session_gone = had_session;
  } else if (status == 408) {
    v.how_far = delivery::unknown;
    v.kind = outcome_kind::timeout;
  } else if (status >= 400 && status < 500) {
    v.how_far = delivery::not_sent;
    v.kind = outcome_kind::permanent;
  } else {
    v.how_far = delivery::unknown;
  }
  return v;
}

} // namespace sluice::policy::mcp
