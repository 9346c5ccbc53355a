// One request on the engine's connection and its answer: written, read
// as it comes (a streamed answer's bytes passed on), and its outcome.

#include <array>
#include <chrono>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/send.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/upstream/http_engine.hpp"
#include "sluice/actors/wire/handler_memory.hpp"
#include "sluice/actors/wire/http_head.hpp"
#include "sluice/actors/wire/piece_pool.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice::upstream {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// The next read's deadline (`policy::read_deadline`). One already passed
// fails the exchange now: an upstream whose bytes are always there when a
// read starts would otherwise have each read set the alarm again before
// it fires, and never time out.
bool http_client::engine::arm(const exchange_ptr& ex) {
  auto now = time_.now();
  auto at = read_deadline(timeouts_, ex->sent, ex->reader->body_bytes() > 0,
                          now, ex->deadline);
  if (deadline_passed(at, now)) {
    ex->reason = read_timeout_reason(*ex);
    fail(ex, policy::outcome_kind::timeout);
    return false;
  }
  expire_at(ex, at);
  return true;
}

void http_client::engine::send(const exchange_ptr& ex) {
  ex->sent = time_.now();
  ex->reader.emplace(limits_for(*ex));
  if (!arm(ex)) // the write is bounded as the first read
    return;
  // Write the request, then read the answer as it comes: its head as one
  // string and its body, in one gathered write. Over plain TCP first
  // without waiting: a socket with room in its send buffer (the usual
  // case) takes the whole request now, and the answer's read starts in
  // the same round. What it does not take is written asynchronously.
  ex->head = take_piece();
  write_head(ex->req.base(), ex->head);
  std::array<net::const_buffer, 2> request{net::buffer(ex->head),
                                           net::buffer(ex->req.body())};
  auto written =
      guarded(ex, "write", [this, ex](beast::error_code ec, std::size_t) {
        give_back_piece(std::move(ex->head));
        ec = step_result(*ex, ec);
        if (ec)
          return retry_or_fail(ex, ec, "write");
        read_more(ex);
      });
  if (ex->stream->secure())
    return net::async_write(*ex->stream, request, std::move(written));
  beast::error_code ec;
  auto& socket = ex->stream->tcp().socket();
  if (!socket.non_blocking())
    socket.non_blocking(true, ec);
  size_t sent = 0;
  if (!ec)
    sent = net::write(socket, request, ec);
  if (!ec) {
    give_back_piece(std::move(ex->head));
    return read_more(ex);
  }
  if (ec != net::error::would_block && ec != net::error::try_again) {
    // Failed: handled as a handler, as the asynchronous write's (a retry
    // on a fresh connection does not recurse here).
    net::post(ioc_, [written, ec]() mutable { written(ec, 0); });
    return;
  }
  beast::buffers_suffix<std::array<net::const_buffer, 2>> rest{request};
  rest.consume(sent);
  net::async_write(*ex->stream, rest, std::move(written));
}

void http_client::engine::read_more(const exchange_ptr& ex) {
  if (!ex->done)
    return; // cancelled
  if (!arm(ex))
    return;
  ex->stream->async_read_some(
      ex->reader->prepare(),
      bind_memory(
          ex->stream->read_memory(),
          guarded(ex, "read", [this, ex](beast::error_code ec, std::size_t n) {
            on_read(ex, ec, n);
          })));
}

void http_client::engine::on_read(const exchange_ptr& ex, beast::error_code ec,
                                  std::size_t n) {
  if (!ex->done)
    return; // cancelled
  ec = step_result(*ex, ec);
  auto& rd = *ex->reader;
  if (n > 0) {
    rd.commit(n);
    pass_on(ex);
  }
  if (rd.verdict() == upstream::read_verdict::reading && ec) {
    if (!upstream::is_end_of_stream(ec) || (ex->reused && !rd.received_any()))
      return retry_or_fail(ex, ec, "read");
    rd.eof(); // an answer delimited by the close, or one cut short
    pass_on(ex);
  }
  if (rd.verdict() == upstream::read_verdict::reading)
    return read_more(ex);
  finish(ex);
}

// A streamed 2xx answer's bytes go on now; the governor relays them.
void http_client::engine::pass_on(const exchange_ptr& ex) {
  auto& rd = *ex->reader;
  if (!rd.streaming() || !ex->done)
    return;
  auto piece = rd.take_body();
  if (!piece.empty())
    caf::anon_send(ex->stream_to, stream_chunk_atom_v, ex->tag,
                   std::move(piece));
}

// A pooled connection the upstream had closed fails at once: try once more
// on a fresh one. Anything else is the attempt's outcome.
void http_client::engine::retry_or_fail(const exchange_ptr& ex,
                                        beast::error_code ec,
                                        const char* step) {
  if (!ex->done)
    return; // cancelled
  if (ex->reused && !ex->reader->received_any() &&
      ec != beast::error::timeout) {
    ex->stream->close();
    return connect_or_reuse(ex);
  }
  if (upstream::is_tls_error(ec)) {
    // E.g. an alert after the handshake: the upstream wanted a client
    // certificate it did not get (TLS 1.3 says so only then).
    static log_limit lim;
    log_limited(lim, spdlog::level::warn, "http source {}: TLS error: {}",
                where_, ec.message());
    ex->reason = "tls: " + ec.message();
  } else if (ec == beast::error::timeout) {
    ex->reason = read_timeout_reason(*ex);
  } else {
    ex->reason = std::string{step} + ": " + ec.message();
  }
  fail(ex, ec == beast::error::timeout ? policy::outcome_kind::timeout
                                       : policy::outcome_kind::transient);
}

// Which read deadline passed: before the body's first byte, the first
// byte's (or the whole answer's); after it, the gap between pieces (or
// the whole answer's).
std::string http_client::engine::read_timeout_reason(const exchange& ex) {
  return ex.reader && ex.reader->body_bytes() > 0 ? "timeout: answer idle"
                                                  : "timeout: first byte";
}

// An exchange that ends: out of the active ones and the in-flight count,
// its alarm cancelled. False when it had already ended (answered once).
bool http_client::engine::retire(const exchange_ptr& ex) {
  if (!ex->done)
    return false;
  if (active_.erase(ex->id) != 0)
    --stats_->in_flight;
  if (ex->alarm)
    ex->alarm->cancel();
  return true;
}

void http_client::engine::fail(const exchange_ptr& ex,
                               policy::outcome_kind kind) {
  if (!retire(ex))
    return;
  if (ex->stream)
    ex->stream->close();
  auto header = ex->reader && ex->reader->header_done();
  auto r = upstream::failure_reply(kind, header ? ex->reader->status() : 0,
                                   ex->setup_failure);
  if (!ex->reason.empty())
    r.reason = std::move(ex->reason);
  auto done = std::move(ex->done);
  done(std::move(r));
}

// The reading ended (complete, too large, or a framing error).
void http_client::engine::finish(const exchange_ptr& ex) {
  if (!retire(ex))
    return;
  auto& rd = *ex->reader;
  auto status = rd.status();
  if (rd.verdict() == upstream::read_verdict::framing_error) {
    ++stats_->framing_errors;
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "http source {}: framing error in an answer (status {}): "
                "{}; connection closed",
                where_, status, rd.problem());
  } else if (rd.verdict() == upstream::read_verdict::too_large) {
    ++stats_->oversized_bodies;
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "http source {}: answer body (HTTP {}) over its limit; "
                "connection closed",
                where_, status);
  }
  if (upstream::is_auth_refusal(status)) {
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "http source {}: the upstream refused the gateway's "
                "credentials (HTTP {}); answered 502, body withheld",
                where_, status);
  }
  auto r =
      upstream::make_reply(rd, std::chrono::system_clock::now(), cfg_.statuses);
  // Not one its deadline closed just as the answer ended; and only while
  // the recent calls at once need it (`pool_target`), so a steady load
  // opens no connection and a past burst's go as calls finish.
  if (rd.reusable() && !ex->timed_out &&
      pool_.keeps_another(active_.size(), idle_.size(), time_.now())) {
    idle_.push_back(std::move(ex->stream));
  } else {
    ex->stream->close();
    // The longest idle (oldest) pooled ones beyond what is needed go
    // too.
    auto now = time_.now();
    while (!idle_.empty() &&
           !pool_.keeps_another(active_.size(), idle_.size() - 1, now))
      idle_.pop_front();
  }
  auto done = std::move(ex->done);
  done(std::move(r));
}

} // namespace sluice::upstream
