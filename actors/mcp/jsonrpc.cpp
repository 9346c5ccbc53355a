#include "sluice/actors/mcp/jsonrpc.hpp"

#include <algorithm>
#include <optional>
#include <utility>

namespace sluice::mcp {

namespace {

using json = nlohmann::json;

/// Thrown from the parser callback to stop parsing at once.
struct too_deep {};
struct duplicate_key {};

/// One line of JSON, never throwing on invalid UTF-8.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

read_error invalid(std::string what, std::string id = "null") {
  return {invalid_request, "Invalid Request: " + std::move(what),
          std::move(id)};
}

bool is_integer(const json& j) noexcept {
  return j.is_number_integer(); // signed or unsigned, never a float
}

/// The id's JSON text, or nothing for a value that is no id.
std::optional<std::string> id_text(const json& id) {
  if (!id.is_string() && !is_integer(id))
    return std::nullopt;
  return dump(id);
}

/// `id_json` as a builder writes it: a string, an integer or null.
std::string normal_id(std::string_view id_json) {
  if (id_json.empty() || id_json.size() > max_id_bytes)
    return "null";
  auto id = json::parse(id_json.begin(), id_json.end(), nullptr, false);
  if (id.is_string() || is_integer(id))
    return dump(id);
  return "null";
}

/// `params` if it is an object or an array.
const json* structured(const json& params) noexcept {
  return params.is_object() || params.is_array() ? &params : nullptr;
}

std::string envelope(std::string_view id) {
  std::string out = R"({"jsonrpc":"2.0")";
  if (!id.empty()) {
    out += R"(,"id":)";
    out += id;
  }
  return out;
}

std::string method_text(std::string out, std::string_view method,
                        const json& params) {
  out += R"(,"method":)";
  out += dump(json(std::string{method}));
  if (auto p = structured(params)) {
    out += R"(,"params":)";
    out += dump(*p);
  }
  out += '}';
  return out;
}

/// Moves member `key` out of `obj` (null when absent).
json take(json& obj, const char* key) {
  auto i = obj.find(key);
  return i == obj.end() ? json{} : std::move(*i);
}

std::variant<message, read_error> read_object(json& doc) {
  // The id first: every later error can name it.
  std::string id;
  auto id_at = doc.find("id");
  bool has_id = id_at != doc.end();
  if (has_id) {
    auto text = id_text(*id_at);
    bool null_error = id_at->is_null() && doc.contains("error");
    if (!text && !null_error)
      return invalid("id must be a string or an integer");
    id = text ? std::move(*text) : "null";
    if (id.size() > max_id_bytes)
      return invalid("id is longer than " + std::to_string(max_id_bytes) +
                     " bytes");
  }
  auto err_id = has_id ? id : std::string{"null"};
  auto version = doc.find("jsonrpc");
  if (version == doc.end() || !version->is_string() ||
      version->get_ref<const std::string&>() != "2.0")
    return invalid(R"("jsonrpc" must be "2.0")", err_id);
  bool has_method = doc.contains("method");
  bool has_result = doc.contains("result");
  bool has_error = doc.contains("error");
  if (has_result && has_error)
    return invalid("both result and error", err_id);
  message m;
  if (has_method) {
    if (has_result || has_error)
      return invalid("a method and a result or error", err_id);
    auto& method = doc["method"];
    if (!method.is_string())
      return invalid("method must be a string", err_id);
    auto params = doc.find("params");
    if (params != doc.end() && !structured(*params))
      return invalid("params must be an object or an array", err_id);
    m.what = has_id ? message::kind::request : message::kind::notification;
    m.id = std::move(id);
    m.method = std::move(method.get_ref<std::string&>());
    m.params = take(doc, "params");
    return m;
  }
  if (has_result) {
    if (!has_id)
      return invalid("a response needs an id");
    m.what = message::kind::response;
    m.id = std::move(id);
    m.result = take(doc, "result");
    return m;
  }
  if (has_error) {
    auto& e = doc["error"];
    if (!e.is_object() || !e.contains("code") || !is_integer(e["code"]) ||
        !e.contains("message") || !e["message"].is_string())
      return invalid("error must be an object with an integer code and a "
                     "string message",
                     err_id);
    m.what = message::kind::error_response;
    m.id = has_id ? std::move(id) : std::string{"null"};
    m.error = take(doc, "error");
    return m;
  }
  return invalid("neither a method nor a result or error", err_id);
}

} // namespace

std::variant<message, read_error> read_message(std::string_view bytes) {
  if (bytes.size() > max_message_bytes)
    return invalid("larger than " + std::to_string(max_message_bytes) +
                   " bytes");
  // Keys counted per open object: an object that ends up with fewer
  // members than keys read had a key twice (the parser keeps the last).
  std::vector<size_t> keys;
  auto watch = [&keys](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
    case json::parse_event_t::object_start:
    case json::parse_event_t::array_start:
      if (depth >= max_nesting_depth)
        throw too_deep{};
      if (event == json::parse_event_t::object_start)
        keys.push_back(0);
      break;
    case json::parse_event_t::key:
      ++keys.back();
      break;
    case json::parse_event_t::object_end:
      if (parsed.size() != keys.back())
        throw duplicate_key{};
      keys.pop_back();
      break;
    default:
      break;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(bytes.begin(), bytes.end(), watch);
  } catch (const too_deep&) {
    return invalid("nested deeper than " + std::to_string(max_nesting_depth));
  } catch (const duplicate_key&) {
    return invalid("a key appears twice in one object");
  } catch (const json::out_of_range&) {
    // Valid JSON, but a number no double holds (1e400).
    return invalid("a number is out of range");
  } catch (const json::parse_error& e) {
    return read_error{parse_error,
                      "Parse error at byte " + std::to_string(e.byte), "null"};
  } catch (...) {
    return read_error{parse_error, "Parse error", "null"};
  }
  if (doc.is_array())
    return invalid("batches are not supported");
  if (!doc.is_object())
    return invalid("not an object");
  try {
    return read_object(doc);
  } catch (...) {
    // Nothing above throws on a parsed document; should that change, the
    // caller still gets an answer, not an exception.
    return read_error{internal_error, "Internal error", "null"};
  }
}

std::string error_response(std::string_view id_json, int code,
                           std::string_view message, const json* data) {
  auto out = envelope(normal_id(id_json));
  out += R"(,"error":{"code":)";
  out += std::to_string(code);
  out += R"(,"message":)";
  out += dump(json(std::string{message}));
  if (data) {
    out += R"(,"data":)";
    out += dump(*data);
  }
  out += "}}";
  return out;
}

std::string result_response(std::string_view id_json, const json& result) {
  auto out = envelope(normal_id(id_json));
  out += R"(,"result":)";
  out += dump(result);
  out += '}';
  return out;
}

std::string request_text(std::string_view id_json, std::string_view method,
                         const json& params) {
  return method_text(envelope(normal_id(id_json)), method, params);
}

std::string notification_text(std::string_view method, const json& params) {
  return method_text(envelope({}), method, params);
}

line_splitter::line_splitter(size_t max_line)
    : max_line_(max_line) {
  // Nothing allocated until a line is split across reads.
}

void line_splitter::append(std::string_view bytes) {
  auto needed = buf_.size() + bytes.size();
  if (needed > buf_.capacity())
    buf_.reserve(std::min(max_line_, std::max(needed, 2 * buf_.capacity())));
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
}

void line_splitter::feed(std::string_view bytes, const line_handler& on_line) {
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    bool complete = nl != std::string_view::npos;
    auto piece = bytes.substr(0, nl);
    bytes.remove_prefix(complete ? nl + 1 : bytes.size());
    if (dropping_) {
      dropping_ = !complete;
    } else if (buf_.size() + piece.size() > max_line_) {
      buf_.clear();
      ++dropped_;
      dropping_ = !complete;
    } else if (!complete) {
      append(piece);
    } else {
      // A line within one read is passed on without a copy.
      std::string_view line = piece;
      if (!buf_.empty()) {
        append(piece);
        line = {buf_.data(), buf_.size()};
      }
      if (!line.empty() && line.back() == '\r')
        line.remove_suffix(1);
      struct clear_after {
        std::vector<char>& buf;
        ~clear_after() { buf.clear(); }
      } guard{buf_};
      on_line(line);
    }
  }
}

} // namespace sluice::mcp
