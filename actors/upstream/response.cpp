#include "sluice/actors/upstream/response.hpp"

#include "sluice/actors/wire/piece_pool.hpp"

#include <algorithm>
#include <cstring>

#include <boost/beast/http/field.hpp>

#include "sluice/actors/upstream/request.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice::upstream {

namespace http = boost::beast::http;
using error_code = boost::system::error_code;

namespace {

/// Most memory reserved up front for a body whose Content-Length is known;
/// a longer one grows as its bytes actually arrive.
constexpr uint64_t max_body_reserve_bytes = 1024 * 1024;

/// The read buffer: a whole header, plus one read.
constexpr std::size_t max_buffer_bytes = max_header_bytes + read_chunk_bytes;

constexpr uint64_t unlimited = std::numeric_limits<uint64_t>::max();

} // namespace

// -- capped_body --------------------------------------------------------------

void capped_body::reader::init(const boost::optional<uint64_t>& length,
                               error_code& ec) {
  ec = {};
  if (length)
    body_.data.reserve(static_cast<std::size_t>(
        std::min({*length, body_.cap, max_body_reserve_bytes})));
}

std::size_t capped_body::reader::append(const char* data, std::size_t n,
                                        error_code& ec) {
  uint64_t held = body_.data.size();
  uint64_t room = body_.cap > held ? body_.cap - held : 0;
  if (n <= room) {
    body_.data.append(data, n);
    return n;
  }
  body_.data.append(data, static_cast<std::size_t>(room));
  body_.over = true;
  ec = http::error::body_limit;
  return static_cast<std::size_t>(room);
}

// -- response_reader ----------------------------------------------------------

response_reader::response_reader(response_limits limits)
    : limits_(limits)
    , buffer_(max_buffer_bytes) {
  new_parser();
}

void response_reader::new_parser() {
  parser_.emplace();
  parser_->header_limit(max_header_bytes);
  // Our body enforces the limits, once the status says which applies. (Not
  // boost::none for "no limit": Beast 1.74 compares a Content-Length with
  // it and finds every length over the limit.)
  parser_->body_limit(unlimited);
  // One step per put(): the final header is seen before any body byte is
  // parsed, so its limit is in place by then.
  parser_->eager(false);
}

boost::asio::mutable_buffer response_reader::prepare() {
  auto room = max_buffer_bytes - std::min(max_buffer_bytes, buffer_.size());
  return buffer_.prepare(std::min(read_chunk_bytes, room));
}

read_verdict response_reader::commit(std::size_t n) {
  buffer_.commit(n);
  if (n > 0)
    received_any_ = true;
  parse();
  return verdict_;
}

read_verdict response_reader::put(std::string_view bytes) {
  while (verdict_ == read_verdict::reading && !bytes.empty()) {
    auto b = prepare();
    auto n = std::min(b.size(), bytes.size());
    if (n == 0)
      return fail(read_verdict::framing_error, "read buffer full");
    std::memcpy(b.data(), bytes.data(), n);
    bytes.remove_prefix(n);
    commit(n);
  }
  return verdict_;
}

read_verdict response_reader::eof() {
  if (verdict_ != read_verdict::reading)
    return verdict_;
  if (!parser_->got_some() || buffer_.size() > 0)
    return fail(read_verdict::framing_error,
                received_any_ ? "closed in the middle of an answer"
                              : "closed without answering");
  error_code ec;
  parser_->put_eof(ec);
  if (ec || !parser_->is_done())
    return fail(read_verdict::framing_error,
                "closed in the middle of an answer");
  body_bytes_ = body_taken_ + parser_->get().body().data.size();
  verdict_ = read_verdict::complete; // a body delimited by the close
  return verdict_;
}

void response_reader::parse() {
  while (verdict_ == read_verdict::reading && buffer_.size() > 0) {
    error_code ec;
    auto n = parser_->put(buffer_.data(), ec);
    buffer_.consume(n);
    if (ec == http::error::need_more)
      break;
    if (ec) {
      if (ec == http::error::body_limit && parser_->get().body().over) {
        body_bytes_ = body_taken_ + parser_->get().body().data.size();
        fail(read_verdict::too_large, "body over its limit");
      } else {
        // Beast's own words for what is wrong; never the upstream's bytes.
        fail(read_verdict::framing_error, ec.message());
      }
      return;
    }
    if (!final_header_ && parser_->is_header_done()) {
      auto status = parser_->get().result_int();
      if (status / 100 == 1) {
        // An interim answer (RFC 9110 §15.2): Beast completes it at its
        // header; the real one follows on the same connection.
        if (status == 101)
          return void(fail(read_verdict::framing_error,
                           "101 Switching Protocols to a plain request"));
        if (interim_ == max_interim_responses)
          return void(
              fail(read_verdict::framing_error, "too many 1xx answers"));
        ++interim_;
        new_parser();
        continue;
      }
      on_final_header();
      if (verdict_ != read_verdict::reading)
        return;
    }
    if (final_header_)
      body_bytes_ = body_taken_ + parser_->get().body().data.size();
    if (parser_->is_done()) {
      verdict_ = read_verdict::complete;
      return;
    }
    if (n == 0)
      break; // no step possible without more bytes
  }
  // Whatever the parser could not use must fit a header; more is no HTTP.
  if (verdict_ == read_verdict::reading && buffer_.size() >= max_header_bytes)
    fail(read_verdict::framing_error, "no answer within the header limit");
}

void response_reader::on_final_header() {
  final_header_ = true;
  auto status = parser_->get().result_int();
  if (status < 200 || status > 599)
    return void(fail(read_verdict::framing_error, "status out of range"));
  bool ok = status < 300;
  streaming_ = ok && limits_.stream_2xx;
  auto cap = streaming_
                 ? unlimited
                 : (ok ? limits_.max_body_bytes : limits_.max_error_body_bytes);
  // A length over the limit is refused before a byte of it is read.
  if (auto len = parser_->content_length(); len && *len > cap)
    return void(fail(read_verdict::too_large, "Content-Length over the limit"));
  parser_->get().body().cap = cap;
}

read_verdict response_reader::fail(read_verdict v, std::string what) {
  verdict_ = v;
  problem_ = std::move(what);
  return v;
}

int response_reader::status() const noexcept {
  return final_header_ ? static_cast<int>(parser_->get().result_int()) : 0;
}

const response_reader::header_type& response_reader::header() const {
  return parser_->get().base();
}

std::string response_reader::take_body() {
  // The body goes on; the parser reads on into a string kept from an
  // earlier piece (`piece_pool`), with the room it had.
  std::string out = take_piece();
  out.swap(parser_->get().body().data);
  body_taken_ += out.size();
  return out;
}

bool response_reader::reusable() const noexcept {
  return verdict_ == read_verdict::complete && parser_->keep_alive() &&
         buffer_.size() == 0;
}

// -- replies ------------------------------------------------------------------

bool is_auth_refusal(int status) noexcept {
  return status == 401 || status == 403 || status == 407;
}

source_reply make_reply(response_reader& r,
                        std::chrono::system_clock::time_point now,
                        const policy::status_rules& rules) {
  source_reply out;
  out.status = r.status();
  switch (r.verdict()) {
  case read_verdict::reading:
  case read_verdict::framing_error:
    out.kind = policy::outcome_kind::transient;
    out.body = r.problem().compare(0, 6, "closed") == 0
                   ? R"({"error":"upstream closed its answer early"})"
                   : R"({"error":"upstream sent a malformed answer"})";
    return out;
  case read_verdict::too_large:
  case read_verdict::complete:
    break;
  }
  const auto& h = r.header();
  out.kind = rules.classify(out.status, r.body_bytes());
  if (auto ra = h.find(http::field::retry_after); ra != h.end())
    out.retry_after = policy::parse_retry_after(
        std::string_view{ra->value().data(), ra->value().size()}, now);
  // The upstream's own rate limits, for the source's headroom.
  for (auto& field : h) {
    auto name = field.name_string();
    auto value = field.value();
    policy::read_limit_header(out.limits, {name.data(), name.size()},
                              {value.data(), value.size()}, now);
  }
  if (is_auth_refusal(out.status)) {
    // The upstream's 401/403/407 concerns the gateway's own key, and its
    // body may quote it: neither is the client's business.
    out.body = "{\"error\":{\"type\":\"upstream_auth_error\",\"message\":"
               "\"the upstream refused the gateway's credentials (HTTP " +
               std::to_string(out.status) + ")\"}}";
    out.status = 502;
    out.retry_after.reset();
    return out;
  }
  if (r.verdict() == read_verdict::too_large) {
    // A 2xx that cannot be held is no answer; an error keeps its class.
    if (out.kind == policy::outcome_kind::ok)
      out.kind = policy::outcome_kind::transient;
    auto limit = out.status < 300 ? r.limits().max_body_bytes
                                  : r.limits().max_error_body_bytes;
    out.body = "{\"error\":\"upstream answer body over the " +
               std::to_string(limit) + "-byte limit (HTTP " +
               std::to_string(out.status) + ")\"}";
    return out;
  }
  out.body = r.take_body(); // empty when it was streamed
  if (auto ct = h.find(http::field::content_type); ct != h.end())
    out.content_type = std::string{ct->value()};
  return out;
}

source_reply failure_reply(policy::outcome_kind kind, int header_status,
                           const std::string& setup_failure) {
  bool timeout = kind == policy::outcome_kind::timeout;
  source_reply r;
  r.kind = kind;
  if (header_status != 0) {
    r.status = header_status;
    r.body = timeout ? R"({"error":"upstream went silent in its answer"})"
                     : R"({"error":"upstream closed its answer early"})";
    r.reason = timeout ? "timeout: answer idle" : "closed: mid-answer";
  } else if (!setup_failure.empty()) {
    r.body = R"({"error":")" + json_safe(setup_failure) + R"("})";
  } else {
    r.body = timeout ? R"({"error":"upstream did not answer in time"})"
                     : R"({"error":"upstream unreachable"})";
    r.reason = timeout ? "timeout: no answer" : "unreachable";
  }
  return r;
}

} // namespace sluice::upstream
