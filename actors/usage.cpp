#include "sluice/actors/usage.hpp"

#include <nlohmann/json.hpp>

namespace sluice {

namespace {

using json = nlohmann::json;

// Reads the top-level `usage` object and whether `choices` is an empty
// array, without building a document.
class usage_sax : public json::json_sax_t {
public:
  policy::token_usage usage;
  bool saw_usage = false; // an object, not null
  bool bad = false;       // a count that is no count, or not an object
  bool choices_array = false;
  size_t choices_items = 0;

  bool null() override {
    value();
    next_ = slot::none;
    return true;
  }
  bool boolean(bool) override { return scalar_not_count(); }
  bool number_integer(number_integer_t v) override {
    if (v < 0)
      return scalar_not_count();
    return number_unsigned(static_cast<number_unsigned_t>(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    value();
    switch (next_) {
    case slot::prompt:
      usage.prompt = v;
      break;
    case slot::completion:
      usage.completion = v;
      break;
    case slot::cached:
      usage.cached_prompt = v;
      break;
    case slot::none:
      break;
    }
    next_ = slot::none;
    return true;
  }
  bool number_float(number_float_t, const string_t&) override {
    return scalar_not_count();
  }
  bool string(string_t&) override { return scalar_not_count(); }
  bool binary(binary_t&) override { return scalar_not_count(); }
  bool start_object(std::size_t) override {
    value();
    ++depth_;
    if (depth_ == 2 && key1_ == "usage") {
      in_usage_ = true;
      saw_usage = true;
    } else if (depth_ == 3 && in_usage_ && details_key_) {
      in_details_ = true;
    }
    next_ = slot::none;
    return true;
  }
  bool end_object() override {
    if (depth_ == 3)
      in_details_ = false;
    if (depth_ == 2)
      in_usage_ = false;
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    value();
    if (depth_ == 0) // the body is not an object
      bad = true;
    ++depth_;
    if (depth_ == 2 && key1_ == "choices") {
      in_choices_ = true;
      choices_array = true;
    }
    next_ = slot::none;
    return true;
  }
  bool end_array() override {
    if (depth_ == 2)
      in_choices_ = false;
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    next_ = slot::none;
    if (depth_ == 1) {
      key1_ = k;
    } else if (depth_ == 2 && in_usage_) {
      details_key_ = k == "prompt_tokens_details";
      if (k == "prompt_tokens")
        next_ = slot::prompt;
      else if (k == "completion_tokens")
        next_ = slot::completion;
    } else if (depth_ == 3 && in_details_ && k == "cached_tokens") {
      next_ = slot::cached;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) override {
    bad = true;
    return false;
  }

private:
  enum class slot { none, prompt, completion, cached };

  // A value begins: an element of `choices` if that is where we are.
  void value() {
    if (depth_ == 0 && !top_seen_) {
      top_seen_ = true;
    }
    if (in_choices_ && depth_ == 2)
      ++choices_items;
  }
  bool scalar_not_count() {
    value();
    if (depth_ == 0 || next_ != slot::none)
      bad = true; // a count that is no count, or a body that is no object
    next_ = slot::none;
    return true;
  }

  int depth_ = 0;
  bool top_seen_ = false;
  std::string key1_;
  bool in_usage_ = false;
  bool details_key_ = false;
  bool in_details_ = false;
  bool in_choices_ = false;
  slot next_ = slot::none;
};

bool parse_usage(std::string_view text, usage_sax& sax) {
  return json::sax_parse(text.begin(), text.end(), &sax,
                         json::input_format_t::json, true) &&
         !sax.bad;
}

// The text a message's or a request's content holds, in bytes.
uint64_t text_bytes(const json& content) {
  if (content.is_string())
    return content.get_ref<const std::string&>().size();
  uint64_t n = 0;
  if (content.is_array())
    for (auto& part : content) {
      if (part.is_string())
        n += part.get_ref<const std::string&>().size();
      else if (part.is_object()) {
        auto t = part.find("text");
        if (t != part.end() && t->is_string())
          n += t->get_ref<const std::string&>().size();
      }
    }
  return n;
}

uint64_t tokens_of_bytes(uint64_t bytes, uint64_t per_token) {
  if (per_token == 0)
    per_token = 1;
  return bytes / per_token + (bytes % per_token != 0 ? 1 : 0);
}

std::optional<uint64_t> count_field(const json& doc, const char* name) {
  auto i = doc.find(name);
  if (i == doc.end() || !i->is_number_integer())
    return std::nullopt;
  if (i->is_number_unsigned())
    return i->get<uint64_t>();
  auto v = i->get<int64_t>();
  return v < 0 ? std::nullopt : std::optional<uint64_t>(uint64_t(v));
}

} // namespace

std::optional<policy::token_usage> read_usage(std::string_view body) {
  // Most answers of a plain call say it; an answer with no `"usage"` key
  // at all (an escaped spelling of it is not looked for) is not parsed.
  if (body.find("\"usage\"") == std::string_view::npos)
    return std::nullopt;
  usage_sax sax;
  if (!parse_usage(body, sax) || !sax.saw_usage)
    return std::nullopt;
  return sax.usage;
}

bool is_usage_chunk(std::string_view data) {
  // Quick: a `"usage"` key whose value is an object.
  constexpr std::string_view key = "\"usage\"";
  bool object = false;
  for (auto at = data.find(key); at != std::string_view::npos && !object;
       at = data.find(key, at + 1)) {
    auto i = at + key.size();
    while (i < data.size() && (data[i] == ' ' || data[i] == '\t' ||
                               data[i] == '\n' || data[i] == '\r'))
      ++i;
    if (i >= data.size() || data[i] != ':')
      continue;
    ++i;
    while (i < data.size() && (data[i] == ' ' || data[i] == '\t' ||
                               data[i] == '\n' || data[i] == '\r'))
      ++i;
    object = i < data.size() && data[i] == '{';
  }
  if (!object)
    return false;
  usage_sax sax;
  return parse_usage(data, sax) && sax.saw_usage && sax.choices_array &&
         sax.choices_items == 0;
}

usage_request ask_for_usage(std::string_view body) {
  usage_request r;
  auto doc = json::parse(body, nullptr, false);
  auto stream = doc.is_object() ? doc.find("stream") : doc.end();
  if (!doc.is_object() || stream == doc.end() || *stream != true) {
    r.body = std::string{body};
    return r;
  }
  auto& options = doc["stream_options"];
  if (options.is_object()) {
    auto asked = options.find("include_usage");
    if (asked != options.end() && *asked == true) {
      r.body = std::string{body};
      return r;
    }
  } else {
    options = json::object();
  }
  options["include_usage"] = true;
  r.body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  r.added = true;
  return r;
}

policy::token_usage estimate_request(std::string_view body,
                                     const estimate_rules& rules) {
  policy::token_usage u;
  u.estimated = true;
  auto doc = json::parse(body, nullptr, false);
  if (!doc.is_object()) {
    u.prompt = tokens_of_bytes(body.size(), rules.bytes_per_token);
    u.completion = rules.default_completion;
    return u;
  }
  uint64_t bytes = 0;
  uint64_t framing = 0;
  bool completes = true;
  auto messages = doc.find("messages");
  if (messages != doc.end() && messages->is_array()) {
    for (auto& m : *messages) {
      framing += rules.tokens_per_message;
      if (m.is_object()) {
        auto c = m.find("content");
        if (c != m.end())
          bytes += text_bytes(*c);
      }
    }
    if (!messages->empty())
      framing += 3; // the answer's priming
  } else if (auto input = doc.find("input"); input != doc.end()) {
    completes = false;
    if (input->is_array() && !input->empty() && input->front().is_number()) {
      framing += input->size(); // already tokens
    } else {
      bytes += text_bytes(*input);
      if (input->is_array())
        for (auto& part : *input)
          if (part.is_array())
            framing += part.size(); // a batch of token arrays
    }
  }
  u.prompt = tokens_of_bytes(bytes, rules.bytes_per_token) + framing;
  if (!completes)
    return u;
  if (auto n = count_field(doc, "max_completion_tokens"))
    u.completion = *n;
  else if (auto m = count_field(doc, "max_tokens"))
    u.completion = *m;
  else
    u.completion = rules.default_completion;
  return u;
}

} // namespace sluice
