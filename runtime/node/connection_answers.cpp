// A connection's answers (every refusal through one path, the writes and
// what follows them, the access-log record, a stream's end) and its part
// in the shutdown. Member functions of `connection`.

#include "sluice/runtime/node/connection.hpp"

#include <algorithm>
#include <cmath>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/http/error.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/wire/http_head.hpp"
#include "sluice/actors/wire/piece_pool.hpp"
#include "sluice/runtime/node/request_access.hpp"
#include "sluice/runtime/node/request_reading.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice::node {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// One log limit per kind of event: a flood of one kind cannot hide another.
log_limit refused_log;
log_limit dropped_log;

} // namespace

// -- answers ------------------------------------------------------------------

void connection::refuse(const refusal& r, bool keep_alive) {
  auto code = r.error.value_or(errc::bad_request);
  ++front_.counters.requests_refused;
  if (code == errc::rate_limited && key_)
    ++key_->rate_limited;
  rec_.error = to_string(code);
  bool unauthorized = code == errc::unauthorized;
  log_limited(refused_log, spdlog::level::info,
              "refused a request from {}{}{}: {} ({})", client_addr_,
              key_ ? " with key " + key_->name() : std::string{},
              unauthorized ? " to " + echo_text(rec_.path) : std::string{},
              r.why, to_string(code));
  auto body = error_body(code, r.why);
  if (r.param != nullptr)
    body["error"]["param"] = r.param;
  if (r.retry_after_s)
    body["error"]["retry_after_s"] = std::ceil(*r.retry_after_s);
  if (r.type != nullptr)
    body["error"]["type"] = r.type;
  auto res = error_response_from(code, body, keep_alive && !unauthorized,
                                 version_, r.retry_after_s);
  // A refusal under a limit says where the limits stand, as an answer does.
  for (auto& [name, value] : spend_.headers())
    res.set(name, value);
  // A browser opening the dashboard prompts for the admin key, then sends
  // it with the page's own requests.
  if (unauthorized)
    res.set(http::field::www_authenticate,
            is_dashboard_path(rec_.path)
                ? "Basic realm=\"sluice admin\", charset=\"UTF-8\""
                : "Bearer realm=\"sluice\"");
  write(std::move(res));
}

refusal connection::rate_refusal(std::chrono::duration<double> wait) const {
  auto per_minute = key_->config().requests_per_minute;
  auto r = refused(errc::rate_limited,
                   "Rate limit reached for key " + key_->name() + ": " +
                       std::to_string(per_minute) + " requests per minute");
  // The bucket's next token is a nanosecond past the instant it is whole
  // (so a timer set to it finds it there): not a second more for the
  // client, who counts in whole seconds.
  r.retry_after_s = std::max(0.0, wait.count() - 1e-9);
  return r;
}

void connection::write(response res, then next) {
  if (rec_.request_id.empty()) // refused before its header was read
    new_request_id(rec_.request_id);
  res.set("X-Request-Id", rec_.request_id);
  if (!cors_origin_.empty())
    set_cors_headers(res, cors_origin_);
  log_access(res.result_int());
  auto keep = res.keep_alive();
  auto code = res.result_int();
  if (code / 100 == 1 || code == 204) {
    // No body, and no Content-Length either (RFC 9110 §8.6: a server
    // must not send one with them).
    res.body().clear();
    res.content_length(boost::none);
  } else if (!res.has_content_length()) {
    res.prepare_payload(); // every answer here has its length: one more
  }
  // The head as one string (a pooled one) and the body as it is: one
  // gathered write of two buffers. First without waiting: a socket with
  // room in its send buffer (the usual case) takes the whole answer now,
  // with no write operation and no timer. What it does not take is written
  // asynchronously, under the write timeout.
  auto head = take_piece();
  write_head(res.base(), head);
  auto& body = res.body();
  beast::error_code ec;
  auto& socket = stream_.socket();
  if (!socket.non_blocking())
    socket.non_blocking(true, ec);
  size_t sent = 0;
  if (!ec)
    sent = net::write(
        socket,
        std::array<net::const_buffer, 2>{net::buffer(head), net::buffer(body)},
        ec);
  if (ec != net::error::would_block && ec != net::error::try_again) {
    // Both strings serve later pieces (an answer's body came from one).
    give_back_piece(std::move(head));
    give_back_piece(std::move(body));
    if (next == then::at_once)
      return after_write(ec, keep);
    net::post(stream_.get_executor(), [self = shared_from_this(), ec, keep] {
      self->guarded("writing a response", [&] { self->after_write(ec, keep); });
    });
    return;
  }
  // What is left, alive until the write is over.
  struct outgoing {
    std::string head;
    std::string body;
  };
  auto out =
      std::make_shared<outgoing>(outgoing{std::move(head), std::move(body)});
  beast::buffers_suffix<std::array<net::const_buffer, 2>> rest{
      std::array<net::const_buffer, 2>{net::buffer(out->head),
                                       net::buffer(out->body)}};
  rest.consume(sent);
  stream_.expires_after(write_timeout);
  net::async_write(stream_, rest,
                   [self = shared_from_this(), out, keep](beast::error_code ec,
                                                          std::size_t) {
                     give_back_piece(std::move(out->head));
                     give_back_piece(std::move(out->body));
                     self->guarded("writing a response",
                                   [&] { self->after_write(ec, keep); });
                   });
}

// The answer is written (or failed): read the next request, or close.
void connection::after_write(beast::error_code ec, bool keep) {
  if (cut_off_) {
    cut_off_ = false;
    --front_.cutoffs_pending;
  }
  if (!ec && body_unread_)
    return linger_close();
  if (ec || !keep || closed_)
    return close();
  do_read();
}

void connection::close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

void connection::linger_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(linger_time);
  drain(0);
}

void connection::drain(size_t dropped) {
  auto sink = std::make_shared<std::array<char, 4096>>();
  stream_.async_read_some(net::buffer(*sink),
                          [self = shared_from_this(), sink,
                           dropped](beast::error_code ec, std::size_t n) {
                            self->guarded("draining a refused request", [&] {
                              if (ec || dropped + n >= linger_bytes) {
                                beast::error_code ignored;
                                self->stream_.socket().close(ignored);
                                return;
                              }
                              self->drain(dropped + n);
                            });
                          });
}

void connection::log_access(unsigned status) {
  if (logged_)
    return;
  logged_ = true;
  if (!front_.access.enabled())
    return;
  rec_.time = std::chrono::system_clock::now();
  rec_.status = status;
  rec_.total = front_.now() - request_started_;
  if (key_)
    rec_.key = key_->name();
  front_.access.write(rec_);
}

void connection::on_stream_end(sse_stream::end e) {
  if (cut_off_) {
    cut_off_ = false;
    --front_.cutoffs_pending;
  }
  if (subscribed_) {
    subscribed_ = false;
    front_.events.unsubscribe(id_);
  }
  log_access(e == sse_stream::end::failed ? client_closed_status : 200);
  if (e == sse_stream::end::failed) {
    // The client is gone, too slow, or its write timed out.
    ++front_.counters.clients_dropped;
    log_limited(dropped_log, spdlog::level::warn,
                "dropped stream client {} on {} ({} bytes queued)",
                client_addr_, route_.empty() ? std::string{"/events"} : route_,
                sse_ ? sse_->queued_bytes() : 0);
    if (pending_)
      call_.cancel(); // the governor ends; permits come back
    closed_ = true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    return;
  }
  // The streamed answer is complete: the connection serves the next
  // request.
  streaming_ = false;
  if (!keep_ || closed_)
    return close();
  do_read();
}

void connection::keep_pending() {
  std::lock_guard<std::mutex> guard{front_.pending_mx};
  front_.pending_connections.insert(shared_from_this());
}

// The call is over: the front no longer keeps this connection alive.
void connection::forget_pending() {
  std::lock_guard<std::mutex> guard{front_.pending_mx};
  front_.pending_connections.erase(shared_from_this());
}

// -- shutdown
// -------------------------------------------------------------------

void connection::shut() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->pending_)
      self->call_.cancel(); // the governor ends; permits come back
    beast::error_code ignored;
    self->stream_.socket().close(ignored);
  });
}

bool shed_idle(front_state& front, bool admin) {
  for (;;) {
    std::shared_ptr<connection> c;
    {
      std::lock_guard<std::mutex> guard{front.connections_mx};
      auto id = (admin ? front.idle_admins : front.idle_clients).take_oldest();
      if (!id)
        return false;
      auto i = front.connections.find(*id);
      if (i != front.connections.end())
        c = i->second.conn.lock();
    }
    if (c) {
      c->shed();
      return true;
    }
  }
}

// NOTE: the connection that makes room was idle when it was chosen; if its
// request began before this runs on its loop, the next oldest goes instead,
// and with none left the listener holds one connection over its cap until
// one closes (the descriptor reserve covers it).
void connection::shed() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->guarded("shedding an idle connection", [&] {
      if (!self->idle_ || self->closed_) {
        shed_idle(self->front_, self->admin_);
        return;
      }
      ++self->front_.counters.connections_shed;
      self->closed_ = true;
      beast::error_code ignored;
      self->stream_.socket().close(ignored); // its read ends, aborted
    });
  });
}

void connection::cut_off() {
  ++front_.cutoffs_pending;
  auto self = shared_from_this();
  net::post(stream_.get_executor(), [self] {
    self->guarded("cutting off a call", [&] {
      if (!self->pending_ || self->closed_) {
        --self->front_.cutoffs_pending;
        return;
      }
      auto& c = *self;
      c.pending_ = false;
      ++c.watch_seq_;
      --c.front_.in_flight;
      c.forget_pending();
      c.call_.cancel(); // the governor ends; permits come back
      c.cut_off_ = true;
      c.keep_ = false;
      c.rec_.error = to_string(errc::shutting_down);
      if (c.streaming_) {
        auto body = error_body(errc::shutting_down,
                               "the node is stopping; the answer is "
                               "incomplete");
        c.sse_->push("event: error\ndata: " + json_text(body) + "\n\n");
        c.sse_->finish();
        return;
      }
      beast::error_code ignored;
      c.stream_.socket().cancel(ignored); // the disconnect watch
      c.write(error_response(errc::shutting_down,
                             "the node is stopping; the call was cut off by "
                             "its shutdown grace period",
                             false, c.version_));
    });
  });
}

} // namespace sluice::node
