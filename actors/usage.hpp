#pragma once

// What a call used (SPEC §12): the `usage` of an OpenAI-shaped answer or
// of a stream's usage chunk, asking a streamed call's upstream for it, and
// the gateway's estimate before a call is sent. Pure functions over JSON
// text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/runtime/policy/spend/spend.hpp"

namespace sluice {

/// The top-level `usage` object of an answer body (a chat completion, an
/// embeddings answer, or one stream event's data): `prompt_tokens`,
/// `completion_tokens` (0 when missing, as in embeddings) and
/// `prompt_tokens_details.cached_tokens`. Nothing when there is none (or
/// `null`), when a count is not a non-negative integer, or when the text is
/// not JSON. Read by a SAX pass: no document is built.
std::optional<policy::token_usage> read_usage(std::string_view body);

/// Whether a stream event's data is the usage chunk a gateway asked for:
/// a top-level `usage` object and empty `choices`. A quick look for the
/// `"usage"` key first, so the events of a stream cost no parse.
bool is_usage_chunk(std::string_view data);

/// A request body with `stream_options.include_usage` set, for a streamed
/// chat call whose client did not ask for usage.
struct usage_request {
  /// The body to send upstream (the client's own when `added` is false).
  std::string body;
  /// The gateway asked for usage: the usage chunk is the gateway's, and
  /// the client does not get it.
  bool added = false;
};

/// For a body with `"stream": true` whose `stream_options.include_usage`
/// is not `true`: the body with it set (keys come out sorted, as with
/// `with_model`). Any other body (not streamed, already asking, not a JSON
/// object) is returned as it is, `added` false.
usage_request ask_for_usage(std::string_view body);

/// How the gateway estimates a call's tokens before it is sent, and an
/// answer's when the upstream said nothing (documented in the README's
/// Limits section).
struct estimate_rules {
  /// Bytes of text per token.
  uint64_t bytes_per_token = 4;
  /// Tokens added per chat message (its role and framing).
  uint64_t tokens_per_message = 4;
  /// Completion tokens reserved when a request sets neither `max_tokens`
  /// nor `max_completion_tokens`.
  uint64_t default_completion = 1024;
};

/// A request's estimate: prompt tokens from the text of its `messages`
/// (string contents and the `text` of content parts) or its `input` (a
/// string or strings), and completion tokens from `max_completion_tokens`,
/// else `max_tokens`, else the default (0 for an `input` request:
/// embeddings complete nothing). A body that is not a JSON object is
/// counted by its bytes alone. Marked estimated.
policy::token_usage estimate_request(std::string_view body,
                                     const estimate_rules& rules = {});

} // namespace sluice
