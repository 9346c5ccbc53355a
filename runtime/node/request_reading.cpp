#include "sluice/runtime/node/request_reading.hpp"

#include <iterator>
#include <random>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include <boost/beast/http/field.hpp>
#include <nlohmann/json.hpp>

namespace sluice::node {

namespace http = boost::beast::http;
using json = nlohmann::json;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string_view view(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

} // namespace

std::optional<std::string_view> request_path(std::string_view target) {
  if (target.empty())
    return std::nullopt;
  if (target.front() != '/') {
    // absolute-form: scheme "://" authority path-abempty [ "?" query ]
    auto scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos)
      return std::nullopt;
    auto scheme = target.substr(0, scheme_end);
    if (!iequals(scheme, "http") && !iequals(scheme, "https"))
      return std::nullopt;
    auto rest = target.substr(scheme_end + 3);
    auto slash = rest.find_first_of("/?");
    if (slash == std::string_view::npos || rest[slash] == '?')
      return std::string_view{"/"};
    target = rest.substr(slash);
  }
  return target.substr(0, target.find('?'));
}

std::optional<std::string> framing_error(const http_fields& h,
                                         unsigned version) {
  auto te = h.count(http::field::transfer_encoding);
  auto cl = h.count(http::field::content_length);
  if (te > 0 && cl > 0)
    return "Transfer-Encoding and Content-Length together";
  if (te > 0) {
    if (version < 11)
      return "Transfer-Encoding in an HTTP/1.0 request";
    // One field, exactly "chunked": any other coding (gzip, "xchunked",
    // "chunked, gzip") leaves the body's end unknown to us.
    if (te > 1 ||
        !iequals(trim(view(h[http::field::transfer_encoding])), "chunked"))
      return "unsupported Transfer-Encoding (only \"chunked\" is accepted)";
  }
  auto hosts = h.count(http::field::host);
  if (version >= 11 && hosts != 1)
    return hosts == 0 ? "no Host header" : "more than one Host header";
  if (hosts > 1)
    return "more than one Host header";
  return std::nullopt;
}

bool expects_continue(const http_fields& h, unsigned version) {
  auto i = h.find(http::field::expect);
  return version >= 11 && i != h.end() &&
         iequals(trim(view(i->value())), "100-continue");
}

bool valid_session_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > max_session_id_bytes)
    return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return c >= 0x21 && c <= 0x7e; });
}

bool valid_request_id(std::string_view id) noexcept {
  if (id.empty() || id.size() > max_request_id_bytes)
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view{"-_.:/+=@"}.find(c) != std::string_view::npos;
  });
}

bool valid_trace_header(std::string_view name, std::string_view value) noexcept {
  if (value.empty() || value.size() > max_trace_header_bytes)
    return false;
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return c >= 0x20 && c <= 0x7e; }))
    return false;
  if (name != "traceparent")
    return true;
  // version-traceid-parentid-flags, lowercase hex (W3C Trace Context §3.2).
  if (value.size() < 55)
    return false;
  for (size_t i = 0; i < 55; ++i) {
    auto c = value[i];
    bool dash = i == 2 || i == 35 || i == 52;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return value.size() == 55 || value[55] == '-';
}

std::optional<std::string> percent_decode(std::string_view segment) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    char c = segment[i];
    if (c == '%') {
      if (i + 2 >= segment.size())
        return std::nullopt;
      int hi = hex(segment[i + 1]), lo = hex(segment[i + 2]);
      if (hi < 0 || lo < 0)
        return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      return std::nullopt;
    out += c;
  }
  return out;
}

namespace {

// "model" or "stream" when `k` folds to one of them under Unicode simple
// case folding but is not it. Besides ASCII letters only two characters
// fold onto ASCII ones: U+017F (long s) onto 's' and U+212A (Kelvin sign)
// onto 'k' -- Go's bytes.EqualFold, which encoding/json uses, takes both.
std::optional<std::string> routing_key_in_another_case(std::string_view k) {
  std::string folded;
  for (size_t i = 0; i < k.size() && folded.size() <= 6;) {
    auto c = static_cast<unsigned char>(k[i]);
    if (c < 0x80) {
      folded += static_cast<char>(std::tolower(c));
      ++i;
    } else if (k.substr(i, 2) == "\xc5\xbf") { // U+017F
      folded += 's';
      i += 2;
    } else if (k.substr(i, 3) == "\xe2\x84\xaa") { // U+212A
      folded += 'k';
      i += 3;
    } else {
      return std::nullopt;
    }
  }
  for (std::string_view exact : {"model", "stream"})
    if (folded == exact && k != exact)
      return std::string{exact};
  return std::nullopt;
}

// SAX reader: checks the body is one object, bounds the depth, and keeps
// the two top-level fields routing needs. Strings are seen one at a time;
// only `model`'s value is kept.
class facts_reader : public json::json_sax_t {
public:
  explicit facts_reader(body_facts& out)
      : out_(out) {
    // nop
  }

  bool null() override { return value(kind::null); }
  bool boolean(bool b) override {
    return value(b ? kind::true_ : kind::false_);
  }
  bool number_integer(number_integer_t) override { return value(kind::other); }
  bool number_unsigned(number_unsigned_t) override {
    return value(kind::other);
  }
  bool number_float(number_float_t, const string_t&) override {
    return value(kind::other);
  }
  bool string(string_t& s) override {
    if (depth_ == 1 && key_ == top_key::model) {
      out_.model = s;
      return true;
    }
    return value(kind::other);
  }
  bool binary(binary_t&) override { return value(kind::other); }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ != 1)
      return true;
    key_ = k == "stream"  ? top_key::stream
           : k == "model" ? top_key::model
                          : top_key::other;
    // Routing and the upstream must read the same value: parsers differ
    // on which of two equal keys wins.
    if (key_ == top_key::stream && std::exchange(seen_stream_, true))
      return refuse("\"stream\" is given twice");
    if (key_ == top_key::model && std::exchange(seen_model_, true))
      return refuse("\"model\" is given twice");
    // ...and on case: Go's encoding/json matches "Model" (or "MODEL", or
    // "ſtream" with U+017F) to a field named model when no exact key is
    // there, and takes the last of several; we route on the exact key.
    if (key_ == top_key::other)
      if (auto exact = routing_key_in_another_case(k))
        return refuse("\"" + k + "\" is \"" + *exact +
                      "\" in another case: only the exact key is accepted "
                      "(an upstream may read keys case-insensitively)");
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) override {
    if (out_.error.empty())
      out_.error = "the body must be a JSON object";
    return false;
  }

private:
  enum class kind { null, true_, false_, other };
  enum class top_key { none, stream, model, other };

  bool value(kind k) {
    if (depth_ == 0)
      return refuse("the body must be a JSON object");
    if (depth_ == 1 && key_ == top_key::stream) {
      if (k == kind::other)
        return refuse("\"stream\" must be true or false");
      out_.stream = k == kind::true_;
    }
    if (depth_ == 1 && key_ == top_key::model && k != kind::null)
      return refuse("\"model\" must be a string");
    return true;
  }

  bool open(bool object) {
    if (depth_ == 0 && !object)
      return refuse("the body must be a JSON object");
    if (depth_ == 1 && key_ == top_key::stream)
      return refuse("\"stream\" must be true or false");
    if (depth_ == 1 && key_ == top_key::model)
      return refuse("\"model\" must be a string");
    if (++depth_ > max_body_depth)
      return refuse("the body nests deeper than " +
                    std::to_string(max_body_depth) + " levels");
    return true;
  }

  bool close() {
    --depth_;
    return true;
  }

  bool refuse(std::string why) {
    out_.error = std::move(why);
    return false;
  }

  body_facts& out_;
  size_t depth_ = 0;
  top_key key_ = top_key::none;
  bool seen_stream_ = false;
  bool seen_model_ = false;
};

} // namespace

body_facts inspect_body(std::string_view body) {
  body_facts out;
  facts_reader reader{out};
  try {
    auto ok = json::sax_parse(body.begin(), body.end(), &reader);
    if (!ok && out.error.empty())
      out.error = "the body must be a JSON object";
  } catch (const std::exception&) {
    out.error = "the body must be a JSON object";
  }
  if (!out.error.empty()) {
    out.stream = false;
    out.model.reset();
  }
  return out;
}

void new_request_id(std::string& out) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  out.clear(); // its room is kept
  fmt::format_to(std::back_inserter(out), "{:016x}{:016x}", rng(), rng());
}

} // namespace sluice::node
