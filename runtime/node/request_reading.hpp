#pragma once

// What the node reads from a request before it routes it: the target's path
// (origin-form or absolute-form), RFC 9112 framing checks, the session id,
// and the two fields of the body routing needs. Pure functions of the
// request's bytes: no I/O, no state.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>

#include "sluice/actors/wire/block_allocator.hpp"

namespace sluice::node {

/// Deepest JSON nesting accepted in a request body; deeper is a 400 (a body
/// of a million `[` must not cost a DOM, nor a stack).
constexpr size_t max_body_depth = 64;

/// Longest `X-Session-Id` (bytes); it must also be printable ASCII.
constexpr size_t max_session_id_bytes = 128;

/// The path of a request target: origin-form `/p?q` or absolute-form
/// `http://host/p?q` (RFC 9112 §3.2.2), without the query. Nothing for a
/// target that is neither (`*`, authority-form, empty). A view into
/// `target` (or a static "/").
std::optional<std::string_view> request_path(std::string_view target);

/// `segment` with its %XX escapes decoded (a model id such as
/// "meta-llama%2FLlama-3"); nullopt for a malformed escape or a decoded
/// control character.
std::optional<std::string> percent_decode(std::string_view segment);

/// Why a request's framing is refused (RFC 9112 §6.1, §6.3, §3.2), or
/// nothing: Transfer-Encoding together with Content-Length, a transfer
/// coding other than exactly `chunked`, no or several `Host` fields in
/// HTTP/1.1 (several in 1.0). A refused request is answered 400 and its
/// connection closed: its body's end cannot be trusted.
std::optional<std::string> framing_error(const http_fields& h,
                                         unsigned version);

/// Whether the request asks for `100 Continue` before it sends its body.
bool expects_continue(const http_fields& h, unsigned version);

/// Whether `id` may name a session: 1 to `max_session_id_bytes` bytes of
/// printable ASCII (0x21 to 0x7e).
bool valid_session_id(std::string_view id) noexcept;

/// Longest `X-Request-Id` taken from a client (bytes).
constexpr size_t max_request_id_bytes = 128;

/// Longest `traceparent` / `tracestate` passed upstream (W3C Trace Context
/// allows 512 bytes of tracestate).
constexpr size_t max_trace_header_bytes = 512;

/// Whether a client's `X-Request-Id` is taken as the request's id: 1 to
/// `max_request_id_bytes` of letters, digits and `-_.:/+=@` (it goes into
/// logs and upstream headers; anything else gets a generated id).
bool valid_request_id(std::string_view id) noexcept;

/// A request id of our own into `out` (its room kept): 32 hex digits,
/// unique, not secret.
void new_request_id(std::string& out);

/// Whether a `traceparent` / `tracestate` value is passed upstream: 1 to
/// `max_trace_header_bytes` of printable ASCII or space (a traceparent must
/// also start like `00-` + 32 hex + `-` + 16 hex + `-` + 2 hex).
bool valid_trace_header(std::string_view name, std::string_view value) noexcept;

/// What routing needs from a call's JSON body, read without building a
/// document.
struct body_facts {
  /// Why the body is refused (empty: accepted).
  std::string error;
  /// `"stream": true`.
  bool stream = false;
  /// `"model"`, when it is a string.
  std::optional<std::string> model;
};

/// Reads `body` as a JSON object (at most `max_body_depth` deep) and picks
/// its top-level `stream` (a boolean or null) and `model`. Never throws.
body_facts inspect_body(std::string_view body);

} // namespace sluice::node
