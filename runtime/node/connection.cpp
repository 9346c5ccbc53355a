#include "sluice/runtime/node/connection.hpp"

#include <array>
#include <cerrno>
#include <exception>
#include <random>

#include <sys/socket.h>

#include <cmath>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <fmt/format.h>

#include "sluice/actors/log.hpp"
#include "sluice/runtime/node/router.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice::node {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// One log limit per kind of event: a flood of one kind cannot hide another.
log_limit refused_log;
log_limit admin_log;
log_limit dropped_log;
log_limit handler_log;

// The interim answer to `Expect: 100-continue` (static: it outlives every
// write of it).
constexpr char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

// What a readable client socket holds, peeked without consuming anything. A
// wakeup for readability is not proof of either: Asio may report a socket
// readable from readiness it saw earlier, with nothing there now.
enum class peer_state { closed, has_data, quiet };

peer_state peek_peer(tcp::socket& socket) {
  char byte;
  auto n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0)
    return peer_state::has_data;
  if (n == 0)
    return peer_state::closed; // orderly shutdown
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
    return peer_state::quiet;
  return peer_state::closed; // reset or another error
}

std::string endpoint_text(const tcp::socket& s) {
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec)
    return "?";
  return ep.address().to_string(ec) + ":" + std::to_string(ep.port());
}

// A client's path in a message: shortened (JSON replaces invalid UTF-8).
std::string echo(const std::string& path) {
  if (path.size() <= max_echoed_path_bytes)
    return path;
  return path.substr(0, max_echoed_path_bytes) + "...";
}

// A request id of our own: 32 hex digits (unique, not secret).
std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

// "nginx's 499": the client went away before its answer.
constexpr unsigned client_closed_status = 499;

// The most headers a call sends upstream on its client's behalf.
constexpr const char* forwarded_trace_headers[] = {"traceparent",
                                                   "tracestate"};

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
    , peer_(endpoint_text(stream_.socket()))
    , admin_(admin) {
  ++front_.open_connections;
  if (admin_)
    ++front_.admin_connections;
}

connection::~connection() {
  if (subscribed_)
    front_.events.unsubscribe(id_);
  {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connections.erase(id_);
  }
  --front_.open_connections;
  if (admin_)
    --front_.admin_connections;
}

void connection::start() {
  {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connections[id_] = {tier_, weak_from_this()};
  }
  net::dispatch(stream_.get_executor(),
                [self = shared_from_this()] { self->do_read(); });
}

// -- failure paths ------------------------------------------------------------

template <class F>
void connection::guarded(const char* where, F&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    fail(where, e.what());
  } catch (...) {
    fail(where, "unknown exception");
  }
}

void connection::fail(const char* where, const char* what) noexcept {
  ++front_.counters.handler_errors;
  try {
    if (!rec_.method.empty()) {
      rec_.error = "handler_error";
      log_access(sse_ && sse_->started() ? 200 : 500); // 200: already sent
    }
  } catch (...) {
    // nothing more to do about it
  }
  try {
    log_limited(handler_log, spdlog::level::err,
                "connection {} from {}: {} threw: {}; closing it", id_, peer_,
                where, what);
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

template <class F>
void connection::post_to(const std::shared_ptr<post_gate>& gate,
                         const std::weak_ptr<connection>& weak, F fn) {
  std::lock_guard<std::mutex> guard{gate->mx};
  if (!gate->open)
    return;
  auto c = weak.lock();
  if (!c)
    return;
  auto exec = c->stream_.get_executor();
  net::post(exec, [c = std::move(c), fn = std::move(fn)]() mutable {
    c->guarded("a posted result", [&] { fn(*c); });
  });
}

// -- reading ------------------------------------------------------------------

void connection::do_read() {
  // A new request (its line is logged once it is answered).
  rec_ = access_record{};
  key_ = nullptr;
  logged_ = false;
  request_started_ = std::chrono::steady_clock::now();
  parser_.emplace();
  parser_->header_limit(max_header_bytes);
  parser_->body_limit(front_.settings.max_body_bytes);
  stream_.expires_after(read_timeout);
  // Read the header first: its framing is checked (and `100 Continue`
  // sent) before any of the body is read.
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) {
        self->guarded("reading a request header", [&] { self->on_header(ec); });
      });
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
  if (parser_->is_done())
    return on_body({});
  read_body();
}

// What the access log and the answer's X-Request-Id need from a header.
void connection::begin_request() {
  auto& req = parser_->get();
  request_started_ = std::chrono::steady_clock::now();
  auto method = req.method_string();
  rec_.method.assign(method.data(), std::min<size_t>(method.size(), 32));
  auto target = req.target();
  auto path = request_path({target.data(), target.size()});
  rec_.path = path ? echo(*path) : "?";
  auto id = req.find("X-Request-Id");
  if (id != req.end() && req.count("X-Request-Id") == 1 &&
      valid_request_id({id->value().data(), id->value().size()}))
    rec_.request_id = std::string{id->value()};
  else
    rec_.request_id = new_request_id();
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

void connection::handle() {
  keep_ = request_.keep_alive();
  version_ = request_.version();
  auto target = request_.target();
  auto path = request_path({target.data(), target.size()});
  if (!path)
    return refuse(errc::bad_request,
                  "the request target must be a path (origin-form) or an "
                  "absolute http URL",
                  keep_);
  auto method = request_.method();
  auto only = [&](http::verb v, const char* usage) {
    if (method == v)
      return true;
    refuse(errc::method_not_allowed, usage, keep_);
    return false;
  };
  if (*path == "/healthz") {
    if (only(http::verb::get, "use GET /healthz"))
      write(make_response(200, R"({"status":"ok"})", keep_, version_));
    return;
  }
  if (path->rfind("/admin/", 0) == 0) {
    if (only(http::verb::post, "use POST on /admin/breakers/SOURCE/ACTION"))
      admin_action(path->substr(7));
    return;
  }
  if (*path == "/status") {
    if (only(http::verb::get, "use GET /status"))
      start_status();
    return;
  }
  if (*path == "/events") {
    if (only(http::verb::get, "use GET /events"))
      start_events();
    return;
  }
  if (*path == "/metrics") {
    if (only(http::verb::get, "use GET /metrics")) {
      auto res = make_response(200, metrics_text(front_), keep_, version_);
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      write(std::move(res));
    }
    return;
  }
  if (admin_)
    return refuse(errc::not_found,
                  "the admin listener serves /healthz, /status, /metrics, "
                  "/events and /admin/ only; calls go to node.listen",
                  keep_);
  if (*path == "/v1/models" || path->rfind("/v1/models/", 0) == 0) {
    if (!only(http::verb::get, "use GET /v1/models"))
      return;
    auto id = percent_decode(path->substr(std::min(path->size(), size_t{11})));
    if (!id)
      return refuse(errc::bad_request, "malformed model id", keep_);
    list_models(*id);
    return;
  }
  if (!front_.rt.has_route(*path))
    return refuse(errc::not_found, "no route " + echo(*path), keep_);
  if (only(http::verb::post, "use POST on a call route"))
    start_call(*path);
}

// GET /v1/models (`id` empty) or /v1/models/ID, in OpenAI's shapes.
void connection::list_models(const std::string& id) {
  auto entry = [&](const std::string& name) {
    return json{{"id", name},
                {"object", "model"},
                {"created", front_.started_unix},
                {"owned_by", "sluice"}};
  };
  auto models = front_.rt.models();
  // A key sees only the models it may use (OpenAI: the others do not
  // exist for it).
  if (key_)
    models.erase(std::remove_if(models.begin(), models.end(),
                                [&](const std::string& m) {
                                  return !key_->may_use(m);
                                }),
                 models.end());
  if (id.empty()) {
    json data = json::array();
    for (auto& m : models)
      data.push_back(entry(m));
    return write(make_response(
        200, json_text({{"object", "list"}, {"data", std::move(data)}}), keep_,
        version_));
  }
  if (std::find(models.begin(), models.end(), id) == models.end())
    return refuse_model(id);
  write(make_response(200, json_text(entry(id)), keep_, version_));
}

void connection::refuse_model(const std::string& model) {
  refuse_param(errc::model_not_found,
               "The model " + echo(model) + " does not exist", "model");
}

// A refusal naming the request field at fault (OpenAI's `param`).
void connection::refuse_param(errc code, const std::string& why,
                              const char* param) {
  ++front_.counters.requests_refused;
  rec_.error = to_string(code);
  log_limited(refused_log, spdlog::level::info,
              "refused a request from {}: {} ({})", peer_, why,
              to_string(code));
  auto body = error_body(code, why);
  body["error"]["param"] = param;
  write(error_response_from(code, body, keep_, version_));
}

// -- answers ------------------------------------------------------------------

void connection::refuse(errc code, const std::string& why, bool keep_alive) {
  ++front_.counters.requests_refused;
  rec_.error = to_string(code);
  log_limited(refused_log, spdlog::level::info,
              "refused a request from {}: {} ({})", peer_, why,
              to_string(code));
  write(error_response(code, why, keep_alive, version_));
}

void connection::write(response res) {
  if (rec_.request_id.empty()) // refused before its header was read
    rec_.request_id = new_request_id();
  res.set("X-Request-Id", rec_.request_id);
  log_access(res.result_int());
  auto keep = res.keep_alive();
  auto sp = std::make_shared<response>(std::move(res));
  stream_.expires_after(write_timeout);
  // Write the response, then read the next request or close.
  http::async_write(
      stream_, *sp,
      [self = shared_from_this(), sp, keep](beast::error_code ec, std::size_t) {
        self->guarded("writing a response", [&] {
          if (self->cut_off_) {
            self->cut_off_ = false;
            --self->front_.cutoffs_pending;
          }
          if (!ec && self->body_unread_)
            return self->linger_close();
          if (ec || !keep || self->closed_)
            return self->close();
          self->do_read();
        });
      });
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
  stream_.async_read_some(
      net::buffer(*sink),
      [self = shared_from_this(), sink, dropped](beast::error_code ec,
                                                 std::size_t n) {
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
  rec_.total = std::chrono::steady_clock::now() - request_started_;
  if (key_)
    rec_.key = key_->name();
  front_.access.write(rec_);
}

// -- who is asking ------------------------------------------------------------

bool connection::is_ops_path(const std::string& path) const {
  return path == "/status" || path == "/metrics" || path == "/events" ||
         path.rfind("/admin/", 0) == 0;
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
  if (is_ops_path(*path))
    return ops_allowed(*path, req.base());
  if (admin_)
    return true; // handle() answers 404: no calls here
  return authenticate(req.base());
}

bool connection::ops_allowed(const std::string& path,
                             const http::fields& headers) {
  // A browser's cross-origin POST needs no preflight: a page the operator
  // visits must not reset breakers.
  if (path.rfind("/admin/", 0) == 0 && headers.count(http::field::origin) > 0) {
    refuse(errc::forbidden,
           "/admin/ takes no cross-origin requests (an Origin header was sent)",
           false);
    return false;
  }
  auto presented = read_presented_key(headers);
  bool admin_key = presented.what == presented_key::kind::token &&
                   front_.keys.is_admin(presented.token);
  ops_request ops;
  ops.on_admin_listener = admin_;
  ops.admin_key_configured = front_.keys.has_admin_key();
  ops.admin_key_presented = admin_key;
  ops.admin_listener_configured = front_.settings.admin_listen.has_value();
  ops.main_listener_loopback = front_.main_loopback;
  ops.client_keys_configured = front_.keys.required();
  switch (decide_ops_access(ops)) {
  case ops_access::allowed:
    return true;
  case ops_access::need_admin_key:
    refuse_unauthorized(presented.what == presented_key::kind::none
                            ? "this endpoint needs the admin key "
                              "(Authorization: Bearer ADMIN_KEY)"
                            : "incorrect admin key");
    return false;
  case ops_access::not_here:
    refuse(errc::forbidden,
           front_.settings.admin_listen
               ? "operations are served on node.admin_listen"
               : "operations are not served here without auth.admin_key "
                 "(this listener is not loopback, or it serves client "
                 "keys); set auth.admin_key or node.admin_listen",
           false);
    return false;
  }
  return false;
}

// Who the caller of a call route or /v1/models is: a known key, or
// anonymous when the node has no keys (a key sent anyway is ignored: SDKs
// always send one).
bool connection::authenticate(const http::fields& headers) {
  key_ = nullptr;
  if (!front_.keys.required())
    return true;
  auto presented = read_presented_key(headers);
  switch (presented.what) {
  case presented_key::kind::none:
    refuse_unauthorized("You didn't provide an API key. Send it as "
                        "Authorization: Bearer KEY");
    return false;
  case presented_key::kind::malformed:
    refuse_unauthorized("Malformed API key header: use Authorization: "
                        "Bearer KEY (or api-key / x-api-key), once");
    return false;
  case presented_key::kind::token:
    break;
  }
  key_ = front_.keys.find(presented.token);
  if (key_ == nullptr) {
    refuse_unauthorized("Incorrect API key provided");
    return false;
  }
  ++key_->requests;
  return true;
}

void connection::refuse_unauthorized(const std::string& why) {
  ++front_.counters.requests_refused;
  rec_.error = to_string(errc::unauthorized);
  log_limited(refused_log, spdlog::level::info,
              "refused a request from {} to {}: {} (invalid_api_key)", peer_,
              rec_.path, why);
  auto res = error_response(errc::unauthorized, why, false, version_);
  res.set(http::field::www_authenticate, "Bearer realm=\"sluice\"");
  write(std::move(res));
}

// POST /admin/breakers/SOURCE/reset | isolate (`rest` after "/admin/").
void connection::admin_action(const std::string& rest) {
  constexpr std::string_view prefix = "breakers/";
  auto slash = rest.rfind('/');
  if (rest.rfind(prefix, 0) != 0 || slash == std::string::npos ||
      slash < prefix.size())
    return refuse(errc::not_found,
                  "no admin action " + echo(rest) +
                      " (use /admin/breakers/SOURCE/reset or /isolate)",
                  keep_);
  auto action_name = rest.substr(slash + 1);
  auto source = percent_decode(
      std::string_view{rest}.substr(prefix.size(), slash - prefix.size()));
  if (!source || source->empty())
    return refuse(errc::bad_request, "malformed source name", keep_);
  breaker_action action;
  if (action_name == "reset")
    action = breaker_action::reset;
  else if (action_name == "isolate")
    action = breaker_action::isolate;
  else
    return refuse(errc::not_found,
                  "no breaker action " + echo(action_name) +
                      " (reset or isolate)",
                  keep_);
  std::optional<source_handle> target;
  for (auto& s : front_.rt.sources())
    if (s.name == *source)
      target = s;
  if (!target)
    return refuse(errc::not_found, "no source " + echo(*source), keep_);
  log_limited(admin_log, spdlog::level::warn,
              "operator action from {}: {} the breaker of source {}", peer_,
              action_name, *source);
  {
    std::lock_guard<std::mutex> guard{front_.pending_mx};
    front_.pending_connections.insert(shared_from_this());
  }
  std::weak_ptr<connection> weak = shared_from_this();
  // Should the spawn throw (no memory), the connection is no longer kept.
  struct unpend {
    connection* c;
    bool armed = true;
    ~unpend() {
      if (armed)
        c->forget_pending();
    }
  } guard{this};
  ask_breaker(
      front_, target->breaker.actor, action,
      [weak, gate = front_.gate, name = *source,
       action_name](std::optional<breaker_status> st) {
        post_to(gate, weak, [st, name, action_name](connection& c) {
          c.forget_pending();
          if (!st)
            return c.refuse(errc::overloaded,
                            "the breaker of " + name + " did not answer",
                            c.keep_);
          c.write(make_response(
              200,
              json_text({{"source", name},
                         {"action", action_name},
                         {"state", std::string{policy::to_string(st->state)}},
                         {"generation", st->generation},
                         {"isolated", st->isolated}}),
              c.keep_, c.version_));
        });
      });
  guard.armed = false;
}

// -- governed calls
// -------------------------------------------------------------

void connection::start_call(const std::string& path) {
  if (request_.count("X-Session-Id") > 1)
    return refuse(errc::bad_request, "more than one X-Session-Id header",
                  keep_);
  call_options opts;
  auto header = request_.find("X-Session-Id");
  if (header != request_.end()) {
    auto v = header->value();
    if (!valid_session_id({v.data(), v.size()}))
      return refuse(errc::bad_request,
                    "X-Session-Id must be 1 to " +
                        std::to_string(max_session_id_bytes) +
                        " printable ASCII characters",
                    keep_);
  }
  // Session ids live in namespaces no client can write into: a key's
  // sub-sessions under its name, anonymous ones apart from the per
  // connection fallback (so no client can join another's session).
  if (key_) {
    if (header != request_.end()) {
      opts.session = "key/" + key_->name() + "/" + std::string{header->value()};
      opts.session_group = key_->tier(); // capped each and together
    } else {
      opts.session_tier = key_->tier(); // the key is the session
    }
    if (auto wait = key_->take(std::chrono::steady_clock::now())) {
      ++key_->rate_limited;
      ++front_.counters.requests_refused;
      rec_.error = to_string(errc::rate_limited);
      auto secs = std::chrono::duration<double>(*wait).count();
      auto per_minute = key_->config().requests_per_minute;
      log_limited(refused_log, spdlog::level::info,
                  "refused a request from {} with key {}: {} requests per "
                  "minute spent (rate_limit_exceeded)",
                  peer_, key_->name(), per_minute);
      auto body = error_body(errc::rate_limited,
                             "Rate limit reached for key " + key_->name() +
                                 ": " + std::to_string(per_minute) +
                                 " requests per minute");
      body["error"]["retry_after_s"] = std::ceil(secs);
      return write(
          error_response_from(errc::rate_limited, body, keep_, version_, secs));
    }
  } else if (header != request_.end()) {
    opts.session = "anon/" + std::string{header->value()};
  } else {
    opts.session = "conn/" + std::to_string(id_);
  }
  auto facts = inspect_body(request_.body());
  if (!facts.error.empty())
    return refuse(errc::bad_request, facts.error, keep_);
  auto model = facts.model.value_or("");
  rec_.model = echo(model);
  if (key_ && !key_->may_use(model)) {
    if (model.empty()) // the route's default would serve any model
      return refuse_param(errc::bad_request,
                          "you must provide a model parameter (key " +
                              key_->name() + " may use only its models)",
                          "model");
    return refuse_model(model); // as OpenAI: not there for this key
  }
  switch (front_.rt.find_route(path, model).miss) {
  case route_miss::none:
    break;
  case route_miss::no_route: // removed meanwhile
    return refuse(errc::not_found, "no route " + echo(path), keep_);
  case route_miss::model_required:
    return refuse_param(errc::bad_request,
                        "you must provide a model parameter", "model");
  case route_miss::model_not_found:
    return refuse_model(model);
  }
  call_request call{path, std::move(request_.body())};
  call.model = std::move(model);
  call.stream = facts.stream;
  call.headers.emplace_back("X-Request-Id", rec_.request_id);
  for (auto name : forwarded_trace_headers) {
    auto h = request_.find(name);
    if (h != request_.end() && request_.count(name) == 1 &&
        valid_trace_header(name, {h->value().data(), h->value().size()}))
      call.headers.emplace_back(name, std::string{h->value()});
  }
  opts.connection = tier_;
  ++front_.in_flight;
  pending_ = true;
  route_ = path;
  started_ = std::chrono::steady_clock::now();
  auto self = shared_from_this();
  try {
    {
      std::lock_guard<std::mutex> guard{front_.pending_mx};
      front_.pending_connections.insert(self);
    }
    std::weak_ptr<connection> weak = self;
    // On an actor thread: hand a piece of the answer, or the result, to
    // the connection's strand.
    auto to_strand = [gate = front_.gate, weak](auto fn) {
      post_to(gate, weak, std::move(fn));
    };
    if (call.stream)
      opts.on_chunk = [to_strand](std::string bytes) {
        to_strand([bytes = std::move(bytes)](connection& c) mutable {
          c.on_chunk(std::move(bytes));
        });
      };
    call_ = front_.rt.call(
        std::move(call),
        [to_strand](call_result r) {
          to_strand([r = std::move(r)](connection& c) mutable {
            c.on_result(std::move(r));
          });
        },
        opts);
  } catch (const std::exception& e) {
    --front_.in_flight;
    pending_ = false;
    forget_pending();
    return refuse(errc::bad_request, e.what(), keep_);
  }
  watch_client();
}

// While the call runs, notice the client going away (its socket reads EOF
// or fails). That cancels the call.
void connection::watch_client() {
  stream_.expires_never();
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this(), seq = watch_seq_](beast::error_code ec) {
        self->guarded("watching a client", [&] {
          if (ec || !self->pending_ || seq != self->watch_seq_)
            return; // stale: that call is over
          switch (peek_peer(self->stream_.socket())) {
          case peer_state::closed:
            self->call_.cancel(); // the governor ends; permits come back
            self->closed_ = true;
            return;
          case peer_state::quiet:
            return self->watch_client(); // a stale wakeup: keep watching
          case peer_state::has_data:
            return; // the client sent more (pipelining): read it later
          }
        });
      });
}

// The call is over: the front no longer keeps this connection alive.
void connection::forget_pending() {
  std::lock_guard<std::mutex> guard{front_.pending_mx};
  front_.pending_connections.erase(shared_from_this());
}

void connection::on_result(call_result r) {
  if (!pending_)
    return; // cut off by the shutdown meanwhile: already answered
  pending_ = false;
  ++watch_seq_; // the disconnect watch is stale now
  --front_.in_flight;
  forget_pending();
  if (!streaming_) {
    // Stop watching for a disconnect (nothing else is pending).
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  if (r.status != call_status::ok && r.status != call_status::cancelled) {
    json v{{"route", route_}, {"status", std::string{to_string(r.status)}}};
    if (!r.reason.empty())
      v["reason"] = r.reason;
    if (r.busy_tier)
      v["tier"] = std::string{to_string(*r.busy_tier)};
    front_.events.publish("event: verdict\ndata: " + json_text(v) + "\n\n");
  }
  front_.metrics.record(route_, r, std::chrono::steady_clock::now() - started_);
  rec_.source = r.source;
  rec_.attempts = static_cast<uint32_t>(r.attempts.size());
  for (auto& a : r.attempts)
    rec_.upstream += a.elapsed;
  rec_.error = access_error(r);
  if (closed_ || r.status == call_status::cancelled) {
    log_access(client_closed_status);
    return close();
  }
  if (!streaming_)
    return write(render(r, keep_, version_));
  // The stream is under way: end it, with an error event if it broke.
  if (!r.ok())
    sse_->push(stream_error_frame(r));
  sse_->finish();
}

// A piece of the answer: the first one sends the response header. From
// here on the call cannot be retried; the governor knows.
void connection::on_chunk(std::string bytes) {
  if (closed_ || !pending_)
    return;
  if (!streaming_) {
    streaming_ = true;
    sse_.emplace(stream_, answer_stream_budget,
                 [this](sse_stream::end e) { on_stream_end(e); });
    sse_->start(shared_from_this(), keep_, version_, rec_.request_id);
  }
  sse_->push(std::move(bytes));
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
                "dropped stream client {} on {} ({} bytes queued)", peer_,
                route_.empty() ? std::string{"/events"} : route_,
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

// -- GET /status --------------------------------------------------------------

void connection::start_status() {
  {
    // Kept alive until answered, or until the front stops.
    std::lock_guard<std::mutex> guard{front_.pending_mx};
    front_.pending_connections.insert(shared_from_this());
  }
  std::weak_ptr<connection> weak = shared_from_this();
  collect_scopes(front_, [weak, gate = front_.gate](json scopes) {
    post_to(gate, weak, [scopes = std::move(scopes)](connection& c) {
      c.forget_pending();
      c.write(make_response(200, json_text(status_json(c.front_, scopes)),
                            c.keep_, c.version_));
    });
  });
}

// -- GET /events --------------------------------------------------------------

void connection::start_events() {
  // Subscribe before the header goes out, so a client that has seen the
  // header misses nothing published after it; events queue meanwhile.
  std::weak_ptr<connection> weak = shared_from_this();
  auto push = [weak, gate = front_.gate](const std::string& frame) {
    post_to(gate, weak, [frame](connection& c) {
      if (c.sse_)
        c.sse_->push(frame);
    });
  };
  if (!front_.events.subscribe(id_, std::move(push)))
    return refuse(errc::overloaded,
                  "too many /events subscribers (node.max_event_subscribers "
                  "= " +
                      std::to_string(front_.events.max_subscribers()) + ")",
                  false);
  subscribed_ = true;
  keep_ = false; // the stream ends when the client leaves
  beast::error_code ignored;
  stream_.socket().set_option(
      net::socket_base::send_buffer_size(event_send_buffer_bytes), ignored);
  route_.clear();
  sse_.emplace(stream_, event_stream_budget,
               [this](sse_stream::end e) { on_stream_end(e); });
  sse_->start(shared_from_this(), false, version_, rec_.request_id);
  log_access(200);
  sse_->push(breaker_snapshot_frame(front_));
  watch_event_client();
}

void connection::watch_event_client() {
  stream_.socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](beast::error_code ec) {
        self->guarded("watching an /events client", [&] {
          if (!self->sse_ || self->sse_->ended())
            return;
          if (ec)
            return self->sse_->drop();
          auto& socket = self->stream_.socket();
          switch (peek_peer(socket)) {
          case peer_state::closed:
            return self->sse_->drop();
          case peer_state::has_data: {
            // Ignore what the client sends (it is there: this won't block).
            char sink[512];
            beast::error_code ignored;
            socket.read_some(net::buffer(sink), ignored);
            break;
          }
          case peer_state::quiet:
            break;
          }
          self->watch_event_client();
        });
      });
}

// -- shutdown
// -------------------------------------------------------------------

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
