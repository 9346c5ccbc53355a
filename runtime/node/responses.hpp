#pragma once

// The node's answers: JSON error bodies (SPEC §5), a call's result as HTTP,
// and the one place an `errc` becomes an HTTP status. Every JSON the node
// writes goes through `json_text`, which replaces invalid UTF-8 (a client's
// path or header bytes, an upstream's body) instead of throwing.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/messages/call.hpp"
#include "sluice/messages/errors.hpp"

namespace sluice::node {

using json = nlohmann::json;
using response =
    boost::beast::http::response<boost::beast::http::string_body, http_fields>;

/// Longest echo of a client's text (a path, a model) in an error message.
constexpr size_t max_echoed_path_bytes = 200;

/// `text` for an error message: cut after `max_echoed_path_bytes`, marked
/// with "..." (`json_text` replaces any invalid UTF-8 later).
std::string echo_text(std::string_view text);

/// `j` as compact JSON text; invalid UTF-8 in any string becomes U+FFFD.
/// Never throws.
std::string json_text(const json& j);

/// A response with the node's headers and a JSON (or `content_type`) body.
response make_response(unsigned status, std::string body, bool keep_alive,
                       unsigned version);

/// OpenAI's error shape for `code`: `{"error": {"message", "type", "param",
/// "code", "sluice_code"}}` -- `code` our stable name (OpenAI's where it
/// has one, e.g. "model_not_found"), `sluice_code` our number (-32016...).
json error_body(errc code, const std::string& message);

/// The error `code` as a response: the status `describe(code)` gives (the
/// one errc -> HTTP table), `body` (an `error_body(code, ...)`, perhaps with
/// fields added) and `Retry-After`: `retry_after_s` when given, else 1 s on
/// a 503.
response
error_response_from(errc code, const json& body, bool keep_alive,
                    unsigned version,
                    std::optional<double> retry_after_s = std::nullopt);

/// `error_response` with the plain `error_body(code, message)`.
response error_response(errc code, const std::string& message, bool keep_alive,
                        unsigned version);

/// The error a finished call is answered with: none for `ok`; the error of
/// the same name for the others; `shutting_down` for `cancelled` (a
/// cancelled call that is still answered was cut off by the node stopping).
/// An upstream error answers with the upstream's status where it has one.
std::optional<errc> error_of(call_status s) noexcept;

/// The access log's `error` for the finished call `r`: the `code` of the
/// error it is answered with (`error_of`), then `/REASON` if it has one;
/// empty for `ok`; "cancelled" for a call cancelled because its client left
/// (nobody is answered).
std::string access_error(const call_result& r);

/// Sets `Retry-After` to `seconds` rounded up, at least 1.
void set_retry_after(response& res, double seconds);

/// A finished call's answer (a unary call, or a stream that failed before
/// its first byte).
response render(const call_result& r, bool keep_alive, unsigned version);

/// The `event: error` frame that ends a stream that broke off after its
/// first byte.
std::string stream_error_frame(const call_result& r);

} // namespace sluice::node
