#pragma once

// Reading one upstream HTTP/1.1 answer from raw bytes, apart from any
// socket: the HTTP source's engine feeds it what it reads, the fuzz target
// (fuzz/http_response_fuzz.cpp) feeds it arbitrary bytes. Both get the same
// rules (SPEC §7 "one answer per request", "every buffer has a limit"):
// - 1xx interim answers are skipped; 101 is a framing error (a gateway never
//   asks to switch protocols);
// - every body read has a limit: a 2xx body held whole `max_body_bytes`, an
//   error body `max_error_body_bytes`; only a streamed 2xx body, passed on
//   as it arrives, is unbounded in length (never held);
// - the connection may be pooled only after a complete keep-alive answer
//   that left nothing unread behind it.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/optional.hpp>

#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/messages/call.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice::upstream {

/// Largest response header (status line and fields) accepted. Beast's own
/// default, 8 KiB, is short for providers that send long trace headers.
constexpr uint32_t max_header_bytes = 64 * 1024;

/// Bytes asked of the socket per read.
constexpr std::size_t read_chunk_bytes = 64 * 1024;

/// Interim (1xx) answers skipped before one answer is a framing error: no
/// honest upstream sends more than a couple, and each costs a parse.
constexpr unsigned max_interim_responses = 16;

/// Limits of one answer (their defaults: `http_source_config`).
struct response_limits {
  /// A 2xx body held whole (a unary call).
  uint64_t max_body_bytes = 0;
  /// A non-2xx body (held whole: it may be retried elsewhere or passed on).
  uint64_t max_error_body_bytes = 0;
  /// A 2xx body is passed on as it arrives (a streamed call), not held.
  bool stream_2xx = false;
};

/// A string body that holds at most `cap` bytes: past it the parse stops
/// with `http::error::body_limit`. Unlike Beast's `string_body` it never
/// reserves what a Content-Length claims beyond the cap (a hostile length
/// would otherwise allocate, or throw, before one body byte arrived).
struct capped_body {
  struct value_type {
    std::string data;
    uint64_t cap = std::numeric_limits<uint64_t>::max();
    /// The body went past `cap`.
    bool over = false;
  };

  class reader {
  public:
    template <bool is_request, class Fields>
    reader(boost::beast::http::header<is_request, Fields>&, value_type& body)
        : body_(body) {
      // nop
    }

    void init(const boost::optional<uint64_t>& length,
              boost::system::error_code& ec);

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers,
                    boost::system::error_code& ec) {
      std::size_t used = 0;
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           it != boost::asio::buffer_sequence_end(buffers); ++it) {
        boost::asio::const_buffer b = *it;
        used += append(static_cast<const char*>(b.data()), b.size(), ec);
        if (ec)
          break;
      }
      return used;
    }

    void finish(boost::system::error_code& ec) { ec = {}; }

  private:
    std::size_t append(const char* data, std::size_t n,
                       boost::system::error_code& ec);

    value_type& body_;
  };
};

/// Where the reading of one answer stands.
enum class read_verdict : uint8_t {
  /// More bytes are needed.
  reading,
  /// The final answer is whole.
  complete,
  /// A body went past its limit: stop reading, close the connection.
  too_large,
  /// Bytes that are not a valid answer (malformed, 101, too many 1xx, cut
  /// short by the upstream closing): close the connection.
  framing_error,
};

/// Reads one answer. Not thread-safe; one per attempt on one connection.
class response_reader {
public:
  using parser_type =
      boost::beast::http::response_parser<capped_body, block_allocator<char>>;
  using header_type = boost::beast::http::response_header<http_fields>;

  explicit response_reader(response_limits limits);

  response_reader(const response_reader&) = delete;
  response_reader& operator=(const response_reader&) = delete;

  /// Room for the next read from the socket. Only while `reading`.
  boost::asio::mutable_buffer prepare();

  /// `n` bytes were read into the last `prepare()`: parses what it can.
  read_verdict commit(std::size_t n);

  /// The upstream closed its end: an answer delimited by the close is
  /// complete now; anything else is cut short.
  read_verdict eof();

  /// Copies `bytes` in and parses them (for in-memory sources: the fuzz
  /// target, tests). Stops early once the verdict is no longer `reading`.
  read_verdict put(std::string_view bytes);

  read_verdict verdict() const noexcept { return verdict_; }

  /// The final (non-1xx) answer's header has arrived.
  bool header_done() const noexcept { return final_header_; }

  /// The final answer's status (0 before `header_done()`).
  int status() const noexcept;

  const header_type& header() const;

  /// The final body's bytes parsed so far (including those taken).
  uint64_t body_bytes() const noexcept { return body_bytes_; }

  /// Any byte at all came from the upstream.
  bool received_any() const noexcept { return received_any_; }

  /// The final answer is a 2xx of a streamed call: its body is passed on.
  bool streaming() const noexcept { return streaming_; }

  /// The body bytes parsed and not yet taken (a streamed answer's next
  /// piece; a held answer's whole body once complete).
  std::string take_body();

  /// Interim (1xx) answers skipped.
  unsigned interim_responses() const noexcept { return interim_; }

  /// The connection may carry another request: a complete keep-alive
  /// answer with nothing unread behind it.
  bool reusable() const noexcept;

  /// What went wrong, for a log line (never upstream bytes).
  const std::string& problem() const noexcept { return problem_; }

  const response_limits& limits() const noexcept { return limits_; }

private:
  void new_parser();
  void parse();
  void on_final_header();
  read_verdict fail(read_verdict v, std::string what);

  response_limits limits_;
  std::optional<parser_type> parser_;
  boost::beast::flat_buffer buffer_;
  read_verdict verdict_ = read_verdict::reading;
  bool final_header_ = false;
  bool streaming_ = false;
  bool received_any_ = false;
  unsigned interim_ = 0;
  uint64_t body_bytes_ = 0;
  uint64_t body_taken_ = 0;
  std::string problem_;
};

/// Statuses by which an upstream refuses the gateway's own credentials
/// (401, 403, 407): their bodies may echo the key, and the client could not
/// act on them anyway.
bool is_auth_refusal(int status) noexcept;

/// The reply for an answer whose reading ended (`verdict() != reading`):
/// - complete: classified by status (and body length) as `rules` say, with
///   Retry-After and Content-Type, the body (empty when streamed); an auth
///   refusal becomes a 502 (its class kept: permanent unless `rules` say
///   otherwise) with a generic `upstream_auth_error` body;
/// - too_large: a 2xx is `transient` (the answer could not be held), an
///   error answer keeps its status's class; the body is a short JSON note;
/// - framing_error: `transient`, a short JSON note.
source_reply make_reply(response_reader& r,
                        std::chrono::system_clock::time_point now,
                        const policy::status_rules& rules = {});

/// The reply for an exchange that ended before its answer did, `kind`
/// (`timeout` or `transient`) saying how: with the answer's status once its
/// header was read (`header_status`; 0: it was not), else with why the
/// connection could not be set up (`setup_failure`; empty: the generic
/// note). The body is a short JSON note either way.
source_reply failure_reply(policy::outcome_kind kind, int header_status,
                           const std::string& setup_failure);

} // namespace sluice::upstream
