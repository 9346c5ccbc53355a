#include "sluice/actors/call_results.hpp"

#include <chrono>
#include <utility>

namespace sluice {

namespace {

double seconds(duration d) {
  return std::chrono::duration<double>(d).count();
}

} // namespace

call_result busy_result(std::optional<tier_kind> tier, duration wait_timeout) {
  call_result r;
  r.status = call_status::tool_busy;
  r.busy_tier = tier;
  r.retry_after_s = seconds(wait_timeout);
  return r;
}

call_result backend_error_result(duration poll_interval) {
  call_result r;
  r.status = call_status::governance_backend_error;
  r.retry_after_s = seconds(poll_interval);
  return r;
}

call_result exhausted_result(std::string reason, duration retry_in) {
  call_result r;
  r.status = call_status::all_sources_exhausted;
  r.reason = std::move(reason);
  r.retry_after_s = seconds(retry_in);
  return r;
}

duration exhausted_retry_in(duration poll_interval,
                            std::optional<time_point> soonest_retry,
                            time_point now) {
  if (soonest_retry && *soonest_retry > now)
    return *soonest_retry - now;
  return poll_interval;
}

call_result answer_result(const std::string& source, source_reply reply) {
  call_result r;
  if (reply.kind != policy::outcome_kind::ok)
    r.status = call_status::upstream_error;
  r.source = source;
  r.body = std::move(reply.body);
  r.content_type = std::move(reply.content_type);
  r.upstream_status = reply.status;
  return r;
}

call_result streamed_result(const std::string& source, source_reply reply) {
  call_result r;
  r.source = source;
  r.streamed = true;
  r.upstream_status = reply.status;
  if (reply.kind != policy::outcome_kind::ok) {
    r.status = call_status::upstream_error;
    r.reason = "stream_interrupted";
  }
  // A streaming source's reply has an empty body, or (a tool server's) the
  // answer that follows the pieces it streamed.
  r.body = std::move(reply.body);
  return r;
}

} // namespace sluice
