#include "sluice/actors/sim_answers.hpp"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/runtime/policy/rng.hpp"

namespace sluice::sim {

namespace {

using json = nlohmann::json;

/// What every simulated chat says; split into the streamed pieces.
constexpr std::string_view answer_text =
    "This is a simulated answer from Sluice.";

uint64_t rough_tokens(size_t bytes) {
  return (bytes + 3) / 4;
}

uint64_t answer_tokens() {
  return rough_tokens(answer_text.size());
}

// FNV-1a, 64 bits: the text's seed for its vector.
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string base64(const unsigned char* p, size_t n) {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t{p[i]} << 16;
    if (i + 1 < n)
      v |= uint32_t{p[i + 1]} << 8;
    if (i + 2 < n)
      v |= p[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? alphabet[v & 63] : '=';
  }
  return out;
}

// A unit vector from the text: the same text, the same vector.
std::vector<float> vector_of(std::string_view text, uint32_t dims) {
  policy::small_rng rng{fnv1a(text)};
  std::vector<float> v(dims);
  double norm = 0;
  for (auto& x : v) {
    x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
    norm += double{x} * x;
  }
  norm = std::sqrt(norm);
  if (norm > 0)
    for (auto& x : v)
      x = static_cast<float>(x / norm);
  return v;
}

std::string embedding_json(const std::vector<float>& v, bool as_base64) {
  if (as_base64) {
    // Little-endian float32, as OpenAI sends it.
    std::string bytes(v.size() * 4, '\0');
    for (size_t i = 0; i < v.size(); ++i) {
      uint32_t u;
      std::memcpy(&u, &v[i], 4);
      for (int b = 0; b < 4; ++b)
        bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xff);
    }
    return "\"" +
           base64(reinterpret_cast<const unsigned char*>(bytes.data()),
                  bytes.size()) +
           "\"";
  }
  fmt::memory_buffer out;
  out.push_back('[');
  for (size_t i = 0; i < v.size(); ++i)
    fmt::format_to(std::back_inserter(out), i == 0 ? "{:.9g}" : ",{:.9g}",
                   v[i]);
  out.push_back(']');
  return fmt::to_string(out);
}

json usage(uint64_t prompt, uint64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

json chunk(const openai_request& req, uint64_t id, int64_t created) {
  json c = {{"id", "chatcmpl-sim-" + std::to_string(id)},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", req.model},
            {"system_fingerprint", nullptr}};
  if (req.include_usage)
    c["usage"] = nullptr;
  return c;
}

std::string event(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n\n";
}

} // namespace

openai_request read_request(std::string_view payload) {
  openai_request req;
  auto doc = json::parse(payload, nullptr, false);
  if (!doc.is_object())
    return req;
  if (auto m = doc.find("model"); m != doc.end() && m->is_string() &&
                                  !m->get_ref<const std::string&>().empty())
    req.model = m->get<std::string>();
  if (auto msgs = doc.find("messages");
      msgs != doc.end() && msgs->is_array()) {
    req.kind = openai_request::shape::chat;
    size_t bytes = 0;
    for (auto& m : *msgs) {
      if (!m.is_object())
        continue;
      auto c = m.find("content");
      if (c == m.end())
        continue;
      if (c->is_string())
        bytes += c->get_ref<const std::string&>().size();
      else if (c->is_array()) // content parts
        for (auto& part : *c)
          if (part.is_object() && part.contains("text") &&
              part["text"].is_string())
            bytes += part["text"].get_ref<const std::string&>().size();
    }
    req.prompt_tokens = rough_tokens(bytes);
    if (auto so = doc.find("stream_options");
        so != doc.end() && so->is_object()) {
      auto iu = so->find("include_usage");
      req.include_usage = iu != so->end() && iu->is_boolean() && iu->get<bool>();
    }
    return req;
  }
  auto input = doc.find("input");
  if (input == doc.end())
    return req;
  req.kind = openai_request::shape::embeddings;
  auto text_of = [](const json& j) {
    return j.is_string() ? j.get<std::string>()
                         : j.dump(-1, ' ', false,
                                  json::error_handler_t::replace);
  };
  // A string, an array of strings, an array of tokens, or of token arrays.
  if (input->is_array() && !input->empty() && !(*input)[0].is_number()) {
    if (input->size() > max_embedding_inputs) {
      req.problem = "at most " + std::to_string(max_embedding_inputs) +
                    " inputs per request";
      return req;
    }
    for (auto& x : *input)
      req.inputs.push_back(text_of(x));
  } else if (!(input->is_array() && input->empty()) &&
             !(input->is_string() && input->get_ref<const std::string&>()
                                         .empty())) {
    req.inputs.push_back(text_of(*input));
  }
  if (req.inputs.empty()) {
    req.problem = "'input' must not be empty";
    return req;
  }
  for (auto& s : req.inputs)
    req.prompt_tokens += rough_tokens(s.size());
  if (auto f = doc.find("encoding_format"); f != doc.end() && f->is_string())
    req.base64 = f->get_ref<const std::string&>() == "base64";
  if (auto d = doc.find("dimensions"); d != doc.end() && !d->is_null()) {
    auto n = d->is_number_integer() ? d->get<int64_t>() : int64_t{0};
    if (n < 1 || n > max_embedding_dimensions) {
      req.problem = "'dimensions' must be an integer in [1, " +
                    std::to_string(max_embedding_dimensions) + "]";
      return req;
    }
    req.dimensions = static_cast<uint32_t>(n);
  }
  return req;
}

std::optional<std::string> answer(const openai_request& req, uint64_t id,
                                  int64_t created,
                                  uint32_t embedding_dimensions) {
  using shape = openai_request::shape;
  if (!req.problem.empty())
    return std::nullopt;
  switch (req.kind) {
    case shape::other:
      return std::nullopt;
    case shape::chat: {
      json a = {
          {"id", "chatcmpl-sim-" + std::to_string(id)},
          {"object", "chat.completion"},
          {"created", created},
          {"model", req.model},
          {"system_fingerprint", nullptr},
          {"choices",
           json::array({{{"index", 0},
                         {"message",
                          {{"role", "assistant"},
                           {"content", answer_text},
                           {"refusal", nullptr}}},
                         {"logprobs", nullptr},
                         {"finish_reason", "stop"}}})},
          {"usage", usage(req.prompt_tokens, answer_tokens())}};
      return a.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    case shape::embeddings: {
      auto dims = req.dimensions != 0 ? req.dimensions : embedding_dimensions;
      if (req.inputs.size() * dims > max_embedding_floats)
        return std::nullopt; // `refusal` says why
      std::string out = R"({"object":"list","data":[)";
      for (size_t i = 0; i < req.inputs.size(); ++i) {
        if (i > 0)
          out += ',';
        out += R"({"object":"embedding","index":)" + std::to_string(i) +
               R"(,"embedding":)" +
               embedding_json(vector_of(req.inputs[i], dims), req.base64) +
               "}";
      }
      json tail = {{"model", req.model},
                   {"usage",
                    {{"prompt_tokens", req.prompt_tokens},
                     {"total_tokens", req.prompt_tokens}}}};
      auto t = tail.dump(-1, ' ', false, json::error_handler_t::replace);
      out += "],";
      out.append(t, 1, std::string::npos); // the tail's members and '}'
      return out;
    }
  }
  return std::nullopt;
}

std::string refusal(const openai_request& req, uint32_t embedding_dimensions) {
  if (!req.problem.empty())
    return req.problem;
  auto dims = req.dimensions != 0 ? req.dimensions : embedding_dimensions;
  if (req.kind == openai_request::shape::embeddings &&
      req.inputs.size() * dims > max_embedding_floats)
    return "inputs x dimensions must be at most " +
           std::to_string(max_embedding_floats) + " (the simulator's limit)";
  return {};
}

std::vector<std::string> chat_events(const openai_request& req, uint64_t id,
                                     int64_t created, int pieces) {
  pieces = std::max(pieces, 1);
  std::vector<std::string> events;
  // The role first, as OpenAI sends it.
  auto c = chunk(req, id, created);
  c["choices"] = json::array(
      {{{"index", 0},
        {"delta", {{"role", "assistant"}, {"content", ""}}},
        {"logprobs", nullptr},
        {"finish_reason", nullptr}}});
  events.push_back(event(c));
  auto step = (answer_text.size() + pieces - 1) / pieces;
  for (size_t at = 0; at < answer_text.size(); at += step) {
    c["choices"][0]["delta"] = {
        {"content", std::string{answer_text.substr(at, step)}}};
    events.push_back(event(c));
  }
  c["choices"][0]["delta"] = json::object();
  c["choices"][0]["finish_reason"] = "stop";
  events.push_back(event(c));
  if (req.include_usage) {
    auto u = chunk(req, id, created);
    u["choices"] = json::array();
    u["usage"] = usage(req.prompt_tokens, answer_tokens());
    events.push_back(event(u));
  }
  return events;
}

std::string error_body(std::string_view message, std::string_view type,
                       std::string_view code) {
  json e = {{"error",
             {{"message", std::string{message}},
              {"type", std::string{type}},
              {"param", nullptr},
              {"code", code.empty() ? json(nullptr) : json(std::string{code})}}}};
  return e.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace sluice::sim
