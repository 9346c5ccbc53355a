#include "sluice/runtime/node/connection.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/wire/http_head.hpp"
#include "sluice/actors/wire/piece_pool.hpp"
#include "sluice/runtime/node/endpoint.hpp"
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
log_limit handler_log;

// The interim answer to `Expect: 100-continue` (static: it outlives every
// write of it).
constexpr char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

std::string endpoint_text(const tcp::socket& s) {
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec)
    return "?";
  return ep.address().to_string(ec) + ":" + std::to_string(ep.port());
}

bool quiet_close(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == beast::error::timeout ||
         ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::operation_aborted ||
         ec == http::error::partial_message || ec == net::error::broken_pipe;
}

} // namespace

connection::connection(tcp::socket&& socket, front_state& front, bool admin)
    : stream_(std::move(socket))
    , front_(front)
    , tier_(front.rt.new_connection())
    , id_(front.next_connection++)
    , client_addr_(endpoint_text(stream_.socket()))
    , admin_(admin) {
  ++front_.open_connections; // its slot (client or admin) was reserved
}

connection::~connection() {
  if (subscribed_)
    front_.events.unsubscribe(id_);
  if (mcp_call_ && mcp_call_->ticket != 0)
    front_.mcp.forget(mcp_call_->ticket);
  {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connections.erase(id_);
    (admin_ ? front_.idle_admins : front_.idle_clients).busy(id_);
  }
  if (admin_)
    --front_.admin_connections;
  else
    --front_.client_connections;
  // Last: at a shutdown on shared loops, 0 open lets the front go.
  --front_.open_connections;
}

void connection::start() {
  {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connections[id_] = {tier_, weak_from_this(), {}};
  }
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this()] { self->do_read(); });
}

// -- failure path -------------------------------------------------------------

void connection::fail(const char* where, const char* what) noexcept {
  ++front_.counters.handler_errors;
  try {
    if (!rec_.method.empty()) {
      rec_.error = "handler_error";
      log_access(sse_ && sse_->header_sent() ? 200 : 500); // 200: already sent
    }
  } catch (...) {
    // nothing more to do about it
  }
  try {
    log_limited(handler_log, spdlog::level::err,
                "connection {} from {}: {} threw: {}; closing it", id_,
                client_addr_, where, what);
  } catch (...) {
    // the log itself failed: nothing more to do about it
  }
  if (pending_)
    call_.cancel(); // the governor ends; permits come back
  closed_ = true;
  if (sse_)
    sse_->drop();
  beast::error_code ignored;
  stream_.socket().close(ignored);
}

// -- reading ------------------------------------------------------------------

void connection::do_read() {
  // A new request (its line is logged once it is answered).
  clear_record(rec_);
  key_ = nullptr;
  cors_origin_.clear();
  logged_ = false;
  request_started_ = front_.now();
  parser_.emplace();
  parser_->header_limit(max_header_bytes);
  parser_->body_limit(front_.settings.max_body_bytes);
  if (buffer_.size() == 0)
    return wait_for_request();
  read_header(); // pipelined: the next request is here already
}

// Its first bytes are read apart from the header (an idle connection
// keeps no big buffer). Until its header is whole the connection counts as
// idle, and at the cap the oldest idle one makes room: a client that sends
// one byte and stops must not hold its slot against new clients.
void connection::wait_for_request() {
  set_idle(true);
  stream_.expires_after(request_timeout());
  // As Beast's own reads: what the buffer has room for, at least 512
  // bytes (an idle connection keeps no 64 KiB buffer).
  stream_.async_read_some(
      buffer_.prepare(beast::read_size(buffer_, read_buffer_bytes)),
      bind_memory(read_memory_, [self = shared_from_this()](
                                    beast::error_code ec, std::size_t n) {
        self->guarded("waiting for a request", [&] {
          if (self->closed_)
            return; // shed meanwhile
          self->buffer_.commit(n);
          if (ec) {
            self->set_idle(false);
            return self->on_read_error(ec);
          }
          self->request_started_ = self->front_.now();
          self->read_header(); // still idle until the header is whole
        });
      }));
}

void connection::set_idle(bool idle) {
  if (idle_ == idle)
    return;
  idle_ = idle;
  std::lock_guard<std::mutex> guard{front_.connections_mx};
  auto& order = admin_ ? front_.idle_admins : front_.idle_clients;
  if (idle)
    order.idle(id_);
  else
    order.busy(id_);
}

std::chrono::steady_clock::duration connection::request_timeout() const {
  if (admin_)
    return front_.settings.admin_idle_timeout;
  return read_timeout;
}

void connection::read_header() {
  // The deadline of the request's reads, its body's too.
  stream_.expires_after(request_timeout());
  // The header is usually whole in the buffer already (it came with the
  // first bytes, or pipelined): parse it here, rather than through a read
  // that completes at once and so is handed back a round of the loop later.
  if (buffer_.size() > 0) {
    beast::error_code ec;
    if (!parse_buffered(true, ec) || parser_->is_header_done()) {
      set_idle(false);
      return on_header(ec);
    }
  }
  // Read the header first: its framing is checked (and `100 Continue`
  // sent) before any of the body is read.
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guarded("reading a request header", [&] {
          self->set_idle(false);
          if (self->closed_)
            return; // shed meanwhile (its header was not whole)
          self->on_header(ec);
        });
      });
}

// As Beast's read does with what it has read: the parser takes what it can
// (the header's limit, the body's limit and the framing are its checks);
// `need_more` asks for a read. A header over the buffer's room is Beast's
// `buffer_overflow` on that read.
bool connection::parse_buffered(bool header_only, beast::error_code& ec) {
  while (buffer_.size() > 0 &&
         !(header_only ? parser_->is_header_done() : parser_->is_done())) {
    auto n = parser_->put(buffer_.data(), ec);
    buffer_.consume(n);
    if (ec == http::error::need_more) {
      ec = {}; // the rest is on its way: read it
      return true;
    }
    if (ec)
      return false;
    if (n == 0)
      break;
  }
  return true;
}

void connection::on_header(beast::error_code ec) {
  if (ec)
    return on_read_error(ec);
  begin_request();
  auto& req = parser_->get();
  if (auto why = framing_error(req.base(), req.version()))
    return refuse(errc::bad_request, "malformed HTTP request: " + *why, false);
  if (front_.stopping)
    return refuse(errc::shutting_down, "the node is stopping", false);
  // Who is asking is decided on the header: a client without a key gets
  // neither `100 Continue` nor a read of its body.
  if (!check_access()) {
    body_unread_ = !parser_->is_done();
    return;
  }
  if (!parser_->is_done() && expects_continue(req.base(), req.version())) {
    // The client waits for this before it sends the body.
    net::async_write(
        stream_, net::buffer(continue_line, sizeof continue_line - 1),
        [self = shared_from_this()](beast::error_code ec, std::size_t) {
          self->guarded("writing 100 Continue", [&] {
            if (ec)
              return self->close();
            self->read_body();
          });
        });
    return;
  }
  // The body is often in the buffer already (it came with the header):
  // parse it here, as the header. (`ec` is clear here.)
  if (!parse_buffered(false, ec))
    return on_read_error(ec);
  if (parser_->is_done())
    return on_body({});
  read_body();
}

// What the access log and the answer's X-Request-Id need from a header.
void connection::begin_request() {
  auto& req = parser_->get();
  request_started_ = front_.now();
  spend_.reset(); // the last call's reservation was settled
  auto method = req.method_string();
  rec_.method.assign(method.data(), std::min<size_t>(method.size(), 32));
  auto target = req.target();
  auto path = request_path({target.data(), target.size()});
  if (path)
    rec_.path.assign(path->data(), path->size()); // cut by the access log
  else
    rec_.path.assign("?");
  auto id = req.find("X-Request-Id");
  if (id != req.end() && req.count("X-Request-Id") == 1 &&
      valid_request_id({id->value().data(), id->value().size()}))
    rec_.request_id.assign(id->value().data(), id->value().size());
  else
    new_request_id(rec_.request_id);
}

void connection::read_body() {
  // Read the rest of the request.
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guarded("reading a request body", [&] { self->on_body(ec); });
      });
}

void connection::on_body(beast::error_code ec) {
  if (ec)
    return on_read_error(ec);
  request_ = parser_->release();
  handle();
}

void connection::on_read_error(beast::error_code ec) {
  if (quiet_close(ec)) {
    if (!rec_.method.empty())
      log_access(client_closed_status); // it left mid-request
    return close(); // the client left, or idled past the read timeout
  }
  if (ec == http::error::header_limit)
    return refuse(errc::headers_too_large,
                  "request header exceeds " + std::to_string(max_header_bytes) +
                      " bytes",
                  false);
  if (ec == http::error::body_limit)
    return refuse(errc::payload_too_large,
                  "request body exceeds " +
                      std::to_string(front_.settings.max_body_bytes) + " bytes",
                  false);
  if (ec == http::error::buffer_overflow)
    return refuse(errc::headers_too_large, "request header too large", false);
  refuse(errc::bad_request, "malformed HTTP request: " + ec.message(), false);
}

// On the header: whether this request may go on (else it was refused and
// the connection closes after the answer, its body unread). Sets `key_`.
bool connection::check_access() {
  auto& req = parser_->get();
  version_ = req.version();
  auto target = req.target();
  auto path = request_path({target.data(), target.size()});
  if (!path || *path == "/healthz")
    return true; // handle() answers it
  keep_ = false; // a refusal here closes the connection
  access_context ctx;
  ctx.on_admin_listener = admin_;
  ctx.admin_listener_configured = front_.settings.admin_listen.has_value();
  ctx.main_listener_loopback = front_.main_loopback;
  keys_ = front_.keys();
  ctx.admin_key_configured = keys_->has_admin_key();
  ctx.client_keys_configured = keys_->required();
  auto& keys = *keys_;
  ctx.is_admin_key = [&keys](std::string_view t) { return keys.is_admin(t); };
  ctx.find_key = [&keys](std::string_view t) { return keys.find(t); };
  ctx.allowed_hosts = &front_.settings.allowed_hosts;
  ctx.allowed_origins = &front_.settings.allowed_origins;
  auto verdict = decide_access(req.method(), *path, req.base(), ctx);
  cors_origin_ = verdict.allow_origin;
  switch (verdict.what) {
  case access_verdict::kind::preflight: {
    // Answered on its header; a preflight has no body to wait for.
    auto res = make_response(204, "", req.keep_alive() && parser_->is_done(),
                             version_);
    res.erase(http::field::content_type);
    set_preflight_headers(res, cors_origin_, req.base());
    cors_origin_.clear(); // set above, once
    write(std::move(res));
    return false;
  }
  case access_verdict::kind::allowed:
    key_ = verdict.key;
    if (key_) {
      ++key_->requests;
      if (key_->name() != listed_key_)
        list_key();
    }
    return true;
  case access_verdict::kind::unauthorized:
    refuse(refused(errc::unauthorized, verdict.why), false);
    return false;
  case access_verdict::kind::forbidden:
    refuse(errc::forbidden, verdict.why, false);
    return false;
  }
  return false;
}

// /status names a connection by the key of its latest request.
void connection::list_key() {
  listed_key_ = key_->name();
  std::lock_guard<std::mutex> guard{front_.connections_mx};
  auto i = front_.connections.find(id_);
  if (i != front_.connections.end())
    i->second.key = key_->name();
}

void connection::handle() {
  keep_ = request_.keep_alive();
  version_ = request_.version();
  auto target = request_.target();
  auto& rt = front_.rt;
  auto choice = choose_endpoint(
      {target.data(), target.size()}, request_.method(), admin_,
      [&rt](const std::string& path) { return rt.has_route(path); });
  if (choice.error)
    return refuse(*choice.error, choice.why, keep_);
  switch (choice.to) {
  case endpoint::healthz:
    return write(
        make_response(200, json_text(healthz_json(front_)), keep_, version_));
  case endpoint::admin_action:
    return admin_action(choice.arg);
  case endpoint::status:
    return start_status();
  case endpoint::events:
    return start_events();
  case endpoint::metrics: {
    auto res = make_response(200, metrics_text(front_), keep_, version_);
    res.set(http::field::content_type, "text/plain; version=0.0.4");
    return write(std::move(res));
  }
  case endpoint::dashboard:
    return serve_dashboard(choice.arg);
  case endpoint::models:
    return list_models(choice.arg);
  case endpoint::call:
    return start_call(choice.arg);
  case endpoint::mcp:
    return serve_mcp();
  }
}

} // namespace sluice::node
