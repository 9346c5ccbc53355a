#pragma once

#include <optional>
#include <string>

#include "sluice/messages/admission.hpp"
#include "sluice/messages/call.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {

/// The `call_result`s a governor can end with, one builder per way a call
/// ends. Pure: the governor adds the attempt record when it delivers.

/// An admission tier (local or the cluster's) did not grant a permit within
/// the deadline: the caller may try again after `wait_timeout`.
call_result busy_result(std::optional<tier_kind> tier, duration wait_timeout);

/// The scope-state backend or the cluster tier failed: fail closed, try
/// again after a poll interval.
call_result backend_error_result(duration poll_interval);

/// No source could complete the call (`reason`: "stalled",
/// "retry_exhausted", "retry_after_too_long").
call_result exhausted_result(std::string reason, duration retry_in);

/// When an exhausted call without a hint of its own is worth trying again:
/// when the soonest rejecting breaker of the last round lets calls through,
/// else after a poll interval.
duration exhausted_retry_in(duration poll_interval,
                            std::optional<time_point> soonest_retry,
                            time_point now);

/// A source's final answer to an unstreamed call: `ok`, or a permanent
/// error passed through as `upstream_error` (fail fast).
call_result answer_result(const std::string& source, source_reply reply);

/// The end of a streamed call once a chunk went out: whatever the attempt's
/// outcome, it is the answer; a failure is "stream_interrupted".
call_result streamed_result(const std::string& source, source_reply reply);

} // namespace sluice
