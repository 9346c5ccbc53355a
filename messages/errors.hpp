#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/make_message.hpp>

namespace sluice {

/// Every way a governed call can end without a result from its source.
/// Values are the CAF error code (category `sluice`); each has a distinct
/// JSON error code and HTTP status, listed in `describe()`.
enum class errc : uint8_t {
  /// Admission wait ran past its deadline; names the tier waited on.
  /// JSON code -32016, HTTP 503.
  tool_busy = 1,
  /// No source could complete the call: `reason` is `stalled` or
  /// `retry_exhausted`. JSON code -32017, HTTP 503.
  all_sources_exhausted,
  /// The backend holding scope-wide state failed; the call is refused rather
  /// than let through unchecked (fail-closed). JSON code -32018, HTTP 503.
  governance_backend_error,
  /// The upstream answered with a permanent error (4xx other than 429); it is
  /// passed through unchanged. JSON code -32019, HTTP status of the upstream.
  upstream_error,
  /// The request is malformed (invalid JSON or fields). JSON -32600, HTTP 400.
  bad_request,
  /// No such route. JSON -32601, HTTP 404.
  not_found,
  /// The route exists but not for this method. JSON -32020, HTTP 405.
  method_not_allowed,
  /// The request body exceeds the configured limit. JSON -32021, HTTP 413.
  payload_too_large,
  /// The request's header exceeds the limit (8 KiB). JSON -32022, HTTP 431.
  headers_too_large,
  /// The node is at a limit of its own (e.g. `/events` subscribers) and
  /// refuses the request rather than grow. JSON -32023, HTTP 503.
  overloaded,
  /// The node is stopping: the call was cut off by the shutdown grace
  /// period, or arrived after it began. JSON -32024, HTTP 503.
  shutting_down,
  /// The route serves no such model (or the caller's key may not use it,
  /// as OpenAI answers). JSON -32025, HTTP 404.
  model_not_found,
  /// No client key, or one the node does not know (code
  /// "invalid_api_key", as OpenAI's). JSON -32026, HTTP 401.
  unauthorized,
  /// The client key's own request rate is spent (code
  /// "rate_limit_exceeded", `Retry-After` set). The node's limit, not the
  /// upstream's: no retry budget is spent. JSON -32027, HTTP 429.
  rate_limited,
  /// The request is not served here: an operations endpoint on a listener
  /// that does not serve it (code "permission_denied"). JSON -32028,
  /// HTTP 403.
  forbidden,
  /// A config reload (`POST /admin/reload`) refused the file: the node
  /// runs on the config it had; the message names the key and line (code
  /// "config_rejected"). JSON -32029, HTTP 422.
  config_rejected,
  /// A client key's or a route's budget (`budget_usd_per_day` /
  /// `_per_month`) is spent until its period ends (code and type
  /// "insufficient_quota", as OpenAI's). JSON -32030, HTTP 429.
  insufficient_quota,
  /// Not a code: one past the last, so that every code can be listed
  /// (`all_errcs`). New codes go before it.
  end_,
};

/// Every code, in order (what tests and documentation iterate).
std::vector<errc> all_errcs();

/// The category atom of every Sluice error.
constexpr caf::atom_value error_category = caf::atom("sluice");

/// Static facts about one error code.
struct error_info {
  std::string_view name; // stable identifier, e.g. "tool_busy": the `code`
                         // of an error body (OpenAI's where it has one)
  int json_code;         // our numeric code: the body's `sluice_code`
  int http_status;       // status at the HTTP gateway
  std::string_view type; // OpenAI's `type`: "invalid_request_error", ...
};

/// Returns the facts for `x`.
error_info describe(errc x) noexcept;

/// Returns the stable name of `x`, e.g. "tool_busy".
std::string to_string(errc x);

/// Creates a CAF error of category `sluice` with optional context.
template <class... Ts>
caf::error make_error(errc x, Ts&&... context) {
  return caf::error{static_cast<uint8_t>(x), error_category,
                    caf::make_message(std::forward<Ts>(context)...)};
}

/// Returns whether `err` is the Sluice error `x`.
inline bool is(const caf::error& err, errc x) noexcept {
  return err && err.category() == error_category &&
         err.code() == static_cast<uint8_t>(x);
}

/// The error of a call that fails closed because a governance backend (the
/// scope state or the cluster's permits, in Redis) did not answer: down,
/// too slow, failing. `governance_backend_error`, never a busy verdict.
inline caf::error backend_fault(std::string why) {
  return make_error(errc::governance_backend_error, std::move(why));
}

/// Registers the `sluice` category so CAF prints our errors by name.
void add_error_category(caf::actor_system_config& cfg);

} // namespace sluice
