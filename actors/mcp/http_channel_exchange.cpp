// One exchange of the HTTP channel: a connection (kept alive or new,
// TLS where the URL says), the request written, the answer read as JSON or
// SSE, and how it ended told to its sender.

#include <algorithm>
#include <cctype>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "sluice/actors/mcp/http_channel_exchange.hpp"
#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice::mcp::http_detail {

log_limit& http_log_limit() {
  static log_limit lim{20};
  return lim;
}

bool valid_session_id(std::string_view id) {
  return !id.empty() && id.size() <= max_session_id_bytes &&
         std::all_of(id.begin(), id.end(),
                     [](char c) { return c >= 0x21 && c <= 0x7e; });
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i])
      return false;
  return true;
}

// A 400's JSON-RPC error message speaks of the session ("No valid session
// ID provided").
bool speaks_of_session(const std::string& body) {
  auto at = body.find("\"message\"");
  if (at == std::string::npos)
    return false;
  std::string rest = body.substr(at, 256);
  std::transform(rest.begin(), rest.end(), rest.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  return rest.find("session") != std::string::npos;
}

bool answers_a_request(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error"))
    return false;
  auto id = j.find("id");
  return id != j.end() && (id->is_string() || id->is_number_integer());
}

} // namespace sluice::mcp::http_detail

namespace sluice::mcp {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using policy::outcome_kind;
using policy::mcp::delivery;
using namespace http_detail;

// -- one exchange
// ----------------------------------------------------------------

http_channel::exchange_ptr http_channel::open(uint64_t id, int method,
                                              std::string body, send_done done,
                                              duration timeout) {
  auto ex = std::make_shared<exchange>();
  ex->id = id;
  ex->method = method;
  ex->done = std::move(done);
  ex->had_session = !session_.empty();
  auto verb = method == post_message ? http::verb::post
              : method == get_stream ? http::verb::get
                                     : http::verb::delete_;
  ex->req = {verb, target_, 11};
  ex->req.set(http::field::host, host_header_);
  ex->req.set(http::field::user_agent, "sluice");
  for (auto& [name, value] : headers_)
    ex->req.set(name, value);
  if (method == post_message) {
    ex->req.set(http::field::content_type, "application/json");
    ex->req.set(http::field::accept, "application/json, text/event-stream");
    ex->req.body() = std::move(body);
  } else if (method == get_stream) {
    ex->req.set(http::field::accept, "text/event-stream");
  }
  if (!session_.empty())
    ex->req.set("Mcp-Session-Id", session_);
  if (!version_.empty())
    ex->req.set("MCP-Protocol-Version", version_);
  ex->req.keep_alive(true);
  ex->req.prepare_payload();
  upstream::response_limits limits;
  limits.max_body_bytes = max_message_;
  limits.max_error_body_bytes = max_http_error_body;
  limits.stream_2xx = true;
  ex->reader.emplace(limits);
  active_[ex->id] = ex;
  if (timeout > duration::zero()) {
    ex->deadline.emplace(ioc_);
    ex->deadline->expires_after(timeout);
    ex->deadline->async_wait(
        [self = shared_from_this(), ex](boost::system::error_code ec) {
          if (ec || !ex->live)
            return;
          self->fail(ex, ex->written ? delivery::unknown : delivery::not_sent,
                     outcome_kind::timeout, "timeout: no answer in time");
        });
  }
  while (!idle_.empty()) {
    auto c = std::move(idle_.front());
    idle_.pop_front();
    if (c->reuse_problem() != nullptr)
      continue;
    ex->conn = std::move(c);
    write(ex);
    return ex;
  }
  connect(ex);
  return ex;
}

void http_channel::connect(const exchange_ptr& ex) {
  ex->conn = std::make_unique<upstream::connection>(ioc_, tls_.get());
  ex->connect_timer.emplace(ioc_);
  ex->connect_timer->expires_after(connect_timeout_);
  auto self = shared_from_this();
  ex->connect_timer->async_wait([self, ex](boost::system::error_code ec) {
    if (ec || !ex->live)
      return;
    self->fail(ex, delivery::not_sent, outcome_kind::transient,
               "timeout: connect");
  });
  resolver_.async_resolve(
      url_.host, url_.port,
      [self, ex](boost::system::error_code ec,
                 tcp::resolver::results_type results) {
        if (!ex->live)
          return;
        if (ec)
          return self->fail(ex, delivery::not_sent, outcome_kind::transient,
                            "resolve: " + ec.message());
        ex->conn->tcp().async_connect(results, [self, ex](
                                                   boost::system::error_code ec,
                                                   const tcp::endpoint&) {
          if (!ex->live)
            return;
          if (ec == net::error::connection_refused && ex->had_session &&
              !self->stopping_) {
            // Nothing listens where the session was: the server is down or
            // restarting. The session is over; a new one starts once it
            // listens again (and the call goes on that one).
            self->fail(ex, delivery::not_sent, outcome_kind::transient,
                       "connect: " + ec.message(), true);
            return self->session_lost("the server refused the connection (" +
                                      ec.message() + ")");
          }
          if (ec)
            return self->fail(ex, delivery::not_sent, outcome_kind::transient,
                              "connect: " + ec.message());
          set_no_delay(ex->conn->tcp().socket());
          if (ex->conn->secure())
            return self->handshake(ex);
          self->write(ex);
        });
      });
}

void http_channel::handshake(const exchange_ptr& ex) {
  if (!ex->conn->expect_peer(peer_name_, verify_))
    return fail(ex, delivery::not_sent, outcome_kind::transient,
                "tls: the peer's name could not be set for verifying");
  ex->conn->async_handshake([self = shared_from_this(),
                             ex](boost::system::error_code ec) {
    if (!ex->live)
      return;
    if (!ec)
      return self->write(ex);
    auto refused = ex->conn->verify_failure();
    self->fail(ex, delivery::not_sent, outcome_kind::transient,
               "tls: " + (refused.empty() ? ec.message()
                                          : "certificate refused: " + refused));
  });
}

void http_channel::write(const exchange_ptr& ex) {
  if (ex->connect_timer)
    ex->connect_timer->cancel();
  http::async_write(
      *ex->conn, ex->req,
      [self = shared_from_this(), ex](boost::system::error_code ec, size_t) {
        if (!ex->live)
          return;
        ex->written = true;
        if (ec)
          return self->fail(ex, delivery::unknown, outcome_kind::transient,
                            "write: " + ec.message());
        self->read(ex);
      });
}

void http_channel::read(const exchange_ptr& ex) {
  ex->conn->async_read_some(
      ex->reader->prepare(),
      [self = shared_from_this(), ex](boost::system::error_code ec, size_t n) {
        if (!ex->live)
          return;
        upstream::read_verdict v;
        if (!ec)
          v = ex->reader->commit(n);
        else if (upstream::is_end_of_stream(ec))
          v = ex->reader->eof();
        else
          return self->fail(ex, delivery::unknown, outcome_kind::transient,
                            "read: " + ec.message());
        if (ex->reader->header_done() && !ex->header_seen) {
          ex->header_seen = true;
          self->on_header(ex);
        }
        if (ex->live && ex->reader->streaming()) {
          auto piece = ex->reader->take_body();
          try {
            if (!piece.empty())
              self->on_body(ex, std::move(piece));
          } catch (const std::exception& e) { // no memory left
            return self->fail(ex, delivery::unknown, outcome_kind::transient,
                              std::string{"reading its answer failed: "} +
                                  e.what());
          }
        }
        if (!ex->live)
          return;
        switch (v) {
        case upstream::read_verdict::reading:
          return self->when_drained(self->ioc_.get_executor(),
                                    [self, ex] { self->read(ex); });
        case upstream::read_verdict::complete:
          return self->finish(ex, true);
        case upstream::read_verdict::too_large:
        case upstream::read_verdict::framing_error:
          return self->finish(ex, false);
        }
      });
}

void http_channel::on_header(const exchange_ptr& ex) {
  auto status = ex->reader->status();
  if (status < 200 || status >= 300)
    return;
  auto& h = ex->reader->header();
  auto sid_field = h["Mcp-Session-Id"];
  std::string_view sid{sid_field.data(), sid_field.size()};
  if (!sid.empty() && session_.empty()) {
    if (valid_session_id(sid))
      session_.assign(sid.data(), sid.size());
    else
      log_limited(http_log_limit(), spdlog::level::warn,
                  "mcp server {}: a session id that is no visible ASCII of "
                  "at most {} bytes: ignored",
                  name_, max_session_id_bytes);
  }
  auto type = h[http::field::content_type];
  if (starts_with_nocase({type.data(), type.size()}, "text/event-stream"))
    ex->sse.emplace(max_message_);
  if (ex->method == get_stream)
    stream_backoff_ = std::chrono::milliseconds{1000}; // it works
}

void http_channel::on_body(const exchange_ptr& ex, std::string piece) {
  if (ex->sse) {
    // Drops are told in their place among the messages (before the ones
    // that came after them).
    auto& sse = *ex->sse;
    auto told = sse.dropped_events();
    auto tell_drops = [&] {
      for (; told < sse.dropped_events(); ++told)
        if (h_.dropped)
          h_.dropped();
    };
    sse.feed(piece, [&](std::string_view data) {
      tell_drops();
      if (h_.message)
        h_.message(data);
    });
    tell_drops();
    return;
  }
  if (ex->json_over)
    return;
  if (ex->json.size() + piece.size() > max_message_) {
    ex->json_over = true;
    ex->json.clear();
    ex->json.shrink_to_fit();
    return;
  }
  ex->json += piece;
}

void http_channel::finish(const exchange_ptr& ex, bool complete) {
  if (!complete)
    return fail(ex, ex->written ? delivery::unknown : delivery::not_sent,
                outcome_kind::transient, "answer: " + ex->reader->problem());
  auto status = ex->reader->status();
  auto verdict = policy::mcp::classify_http_status(status, ex->had_session);
  if (verdict.ok) {
    if (!ex->sse && !ex->json.empty() && h_.message)
      h_.message(ex->json);
    if (ex->json_over && h_.dropped)
      h_.dropped();
    auto conn = ex->reader->reusable() ? std::move(ex->conn) : nullptr;
    auto done = std::move(ex->done);
    close(ex);
    if (conn && !stopping_ && idle_.size() < max_idle_http_connections)
      idle_.push_back(std::move(conn));
    if (ex->method == get_stream)
      relisten(); // the server ended it: opened again
    if (done)
      done(send_outcome{});
    return;
  }
  auto& h = ex->reader->header();
  auto body = ex->reader->take_body();
  if ((status == 400 || status == 404) && ex->had_session) {
    bool about = speaks_of_session(body);
    verdict = policy::mcp::classify_http_status(
        status, true, about, !about && answers_a_request(body));
  }
  send_outcome out;
  out.ok = false;
  out.delivery = verdict.how_far;
  out.kind = verdict.kind;
  out.status = status;
  out.reason = "HTTP " + std::to_string(status);
  out.session_gone = verdict.session_gone;
  if (status == 429 || status == 503)
    if (auto field = h[http::field::retry_after]; !field.empty())
      if (auto ra = policy::parse_retry_after({field.data(), field.size()},
                                              std::chrono::system_clock::now()))
        out.retry_after = *ra;
  // A JSON-RPC error about the request comes as the body of a 4xx: the
  // source reads it as its answer (its id) before the failure.
  if (ex->method == post_message && !verdict.session_gone && !body.empty() &&
      body.front() == '{' && h_.message)
    h_.message(body);
  auto done = std::move(ex->done);
  close(ex);
  if (ex->method == get_stream) {
    if (status == 405) {
      no_stream_ = true; // the server offers no stream of its own
      logger().info("mcp server {}: no GET stream (405): its own messages "
                    "come only with answers",
                    name_);
    } else if (!verdict.session_gone) {
      log_limited(http_log_limit(), spdlog::level::info,
                  "mcp server {}: GET stream refused: HTTP {}", name_, status);
      relisten();
    }
  }
  if (done)
    done(std::move(out));
  if (verdict.session_gone && !stopping_)
    session_lost("the server ended the session (HTTP 404)");
}

void http_channel::fail(const exchange_ptr& ex, delivery how, outcome_kind kind,
                        std::string reason, bool session_gone) {
  if (!ex->live)
    return;
  auto done = std::move(ex->done);
  close(ex);
  log_limited(http_log_limit(), spdlog::level::info, "mcp server {}: {}", name_,
              reason);
  if (ex->method == get_stream)
    relisten();
  if (done) {
    send_outcome out;
    out.ok = false;
    out.delivery = how;
    out.kind = kind;
    out.reason = std::move(reason);
    out.session_gone = session_gone;
    done(std::move(out));
  }
}

void http_channel::close(const exchange_ptr& ex) {
  ex->live = false;
  active_.erase(ex->id);
  if (ex->quiet) {
    ex->quiet = false;
    --quiet_;
  }
  if (ex->connect_timer)
    ex->connect_timer->cancel();
  if (ex->deadline)
    ex->deadline->cancel();
  if (ex->conn)
    ex->conn->close();
  if (stream_id_ == ex->id)
    stream_id_ = 0;
}

} // namespace sluice::mcp
