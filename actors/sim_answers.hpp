#pragma once

// What the simulated source answers: OpenAI-shaped bodies built from the
// request, so that official clients work against a node with no upstream
// at all. Pure functions (no clock, no randomness beyond the input's hash).
//
//   chat (a "messages" array)  -> a `chat.completion`, or when streamed a
//                                 series of `chat.completion.chunk` events
//                                 (usage last if stream_options asks)
//   embeddings ("input")       -> a `list` of `embedding` objects, one per
//                                 input, unit vectors derived from the text,
//                                 as floats or base64 (`encoding_format`)
//   anything else              -> nullopt (the caller's fixed body)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::sim {

/// Largest embedding dimension a request or a config may ask for.
constexpr uint32_t max_embedding_dimensions = 8192;

/// Request fields the answers depend on.
struct openai_request {
  enum class shape { other, chat, embeddings };
  shape kind = shape::other;
  /// The request's model ("simulated" when it names none).
  std::string model = "simulated";
  /// Streamed chats: a last chunk with `usage`.
  bool include_usage = false;
  /// Embeddings: the texts (token arrays as their JSON text); base64 wanted;
  /// the requested dimensions (0: the source's default).
  std::vector<std::string> inputs;
  bool base64 = false;
  uint32_t dimensions = 0;
  /// A rough prompt size in tokens (4 bytes each), for `usage`.
  uint64_t prompt_tokens = 0;
};

/// Reads `payload`; never throws (what is not JSON is `shape::other`).
openai_request read_request(std::string_view payload);

/// The whole answer to `req` (nullopt for `shape::other`). `id` makes the
/// answer's id unique; `created` is its Unix time.
std::optional<std::string> answer(const openai_request& req, uint64_t id,
                                  int64_t created,
                                  uint32_t embedding_dimensions);

/// A streamed chat answer: its server-sent events, each "data: {...}\n\n",
/// in order, without the final "data: [DONE]\n\n". `pieces` content chunks
/// (at least 1).
std::vector<std::string> chat_events(const openai_request& req, uint64_t id,
                                     int64_t created, int pieces);

/// OpenAI's error body: {"error":{"message","type","param","code"}}.
std::string error_body(std::string_view message, std::string_view type,
                       std::string_view code = {});

} // namespace sluice::sim
