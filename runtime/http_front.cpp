#include "runtime/http_front.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <nlohmann/json.hpp>

#include "messages/atoms.hpp"
#include "messages/errors.hpp"
#include "runtime/node_metrics.hpp"

namespace sluice {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;

namespace {

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

// Limits, named once.
constexpr auto read_timeout = std::chrono::seconds{60};
constexpr auto write_timeout = std::chrono::seconds{30};

using response = http::response<http::string_body>;

response make_response(unsigned status, std::string body, bool keep_alive,
                       unsigned version) {
  response res{static_cast<http::status>(status), version};
  res.set(http::field::server, "sluice-node");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// A JSON error body as SPEC §5 describes it.
json error_body(errc code, const std::string& message) {
  auto info = describe(code);
  return json{{"error",
               {{"type", std::string{info.name}},
                {"code", info.json_code},
                {"message", message}}}};
}

void set_retry_after(response& res, double seconds) {
  auto s = static_cast<long>(std::ceil(std::max(seconds, 1.0)));
  res.set(http::field::retry_after, std::to_string(s));
}

// Turns a call's result into its HTTP response.
response render(const call_result& r, bool keep_alive, unsigned version) {
  switch (r.status) {
  case call_status::ok:
  case call_status::upstream_error: {
    // Passed through with the upstream's body and media type; an upstream
    // error with its status too.
    auto status = 200u;
    if (r.status == call_status::upstream_error)
      status = r.upstream_status >= 400 && r.upstream_status < 600
                   ? static_cast<unsigned>(r.upstream_status)
                   : 502u;
    auto res = make_response(status, r.body, keep_alive, version);
    if (!r.content_type.empty())
      res.set(http::field::content_type, r.content_type);
    return res;
  }
  case call_status::tool_busy: {
    auto body = error_body(errc::tool_busy,
                           "admission deadline passed while waiting for a "
                           "permit");
    body["error"]["tier"] =
        r.busy_tier ? std::string{to_string(*r.busy_tier)} : "unknown";
    body["error"]["retry_after_s"] = r.retry_after_s;
    auto res = make_response(503, body.dump(), keep_alive, version);
    set_retry_after(res, r.retry_after_s);
    return res;
  }
  case call_status::all_sources_exhausted: {
    auto body = error_body(errc::all_sources_exhausted,
                           "no source could complete the call");
    body["error"]["reason"] = r.reason;
    body["error"]["retry_after_s"] = r.retry_after_s;
    json attempts = json::array();
    for (auto& a : r.attempts)
      attempts.push_back(
          {{"source", a.source},
           {"outcome", std::string{policy::to_string(a.kind)}},
           {"status", a.status},
           {"elapsed_s", std::chrono::duration<double>(a.elapsed).count()}});
    body["error"]["attempts"] = std::move(attempts);
    auto res = make_response(503, body.dump(), keep_alive, version);
    set_retry_after(res, r.retry_after_s);
    return res;
  }
  case call_status::governance_backend_error: {
    auto body = error_body(errc::governance_backend_error,
                           "the governance backend is unavailable; the "
                           "call was not let through");
    auto res = make_response(503, body.dump(), keep_alive, version);
    set_retry_after(res, r.retry_after_s);
    return res;
  }
  case call_status::cancelled:
    break;
  }
  return make_response(500,
                       error_body(errc::upstream_error, "cancelled").dump(),
                       false, version);
}

response error_response(errc code, const std::string& message, bool keep_alive,
                        unsigned version) {
  return make_response(static_cast<unsigned>(describe(code).http_status),
                       error_body(code, message).dump(), keep_alive, version);
}

} // namespace

// -- shared state of the front
// -------------------------------------------------

struct http_front::impl {
  runtime& rt;
  node_settings settings;
  /// Every open client connection's tier, for /status. Declared before the
  /// io_context: connections still in its handlers are destroyed with it,
  /// and unregister here.
  std::mutex connections_mx;
  std::map<uint64_t, tier_handle> connection_tiers;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::atomic<size_t> in_flight{0};
  node_metrics metrics;
  std::atomic<uint64_t> next_connection{1};
  std::atomic<bool> accepting{true};

  // -- results coming back from actor threads ---------------------------------

  /// Call results arrive on actor threads and are posted to the connection's
  /// strand. Once the I/O threads are stopped, nothing may be posted any
  /// more: the gate closes first, under its lock.
  struct post_gate {
    std::mutex mx;
    bool open = true;
  };
  std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();

  /// Connections with a call in flight, kept alive until its result is
  /// handled; cleared (while the io_context still exists) at shutdown.
  std::mutex pending_mx;
  std::set<std::shared_ptr<void>> pending_connections;

  // -- GET /events subscribers ------------------------------------------------

  struct event_subscriber {
    std::weak_ptr<void> alive;
    std::function<void(std::string)> push;
  };
  std::mutex events_mx;
  std::vector<event_subscriber> event_subscribers;
  /// Subscribes to every breaker and hands its transitions to `publish`.
  caf::actor event_relay;

  /// Sends one server-sent event to every /events client.
  void publish(const std::string& event, const json& data) {
    auto frame = "event: " + event + "\ndata: " + data.dump() + "\n\n";
    std::lock_guard<std::mutex> guard{events_mx};
    auto& subs = event_subscribers;
    subs.erase(std::remove_if(
                   subs.begin(), subs.end(),
                   [](const event_subscriber& s) { return s.alive.expired(); }),
               subs.end());
    for (auto& s : subs)
      s.push(frame);
  }

  impl(runtime& r, const node_settings& s)
      : rt(r)
      , settings(s)
      , acceptor(net::make_strand(ioc)) {
    // nop
  }

  void do_accept();
};

namespace {

json tier_json(const tier_status& t) {
  return {{"cap", t.cap}, {"in_use", t.in_use}, {"waiting", t.waiting}};
}

// GET /status: tiers and breakers read lock-free from their counters and
// mirrors; `scopes` holds what the backend said of each scope's progress.
json status_json(http_front::impl& front, json scopes) {
  json sessions = json::object();
  for (auto& [id, t] : front.rt.live_sessions())
    sessions[id] = tier_json(t);
  json connections = json::object();
  {
    std::lock_guard<std::mutex> guard{front.connections_mx};
    for (auto& [id, t] : front.connection_tiers)
      connections[std::to_string(id)] = tier_json(t.status());
  }
  json sources = json::array();
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    auto t = s.tier->load();
    sources.push_back({{"name", s.name},
                       {"breaker",
                        {{"state", std::string{policy::to_string(b.state)}},
                         {"generation", b.generation}}},
                       {"aimd_limit", s.tier->cap()},
                       {"in_flight", t.in_use}});
  }
  auto open_connections = connections.size();
  json tiers = {{"global", tier_json(front.rt.tiers().global().status())},
                {"sessions", std::move(sessions)},
                {"connections", std::move(connections)}};
  // The global tier across nodes: this node's leases and waiters.
  if (auto& c = front.rt.cluster_stats())
    tiers["cluster"] = {{"cap", front.rt.config().cluster_global_cap},
                        {"held_here", c->held.load()},
                        {"waiting_here", c->waiting.load()},
                        {"leases_lost", c->lost.load()},
                        {"redis_errors", c->errors.load()}};
  return {{"tiers", std::move(tiers)},
          {"connections", open_connections},
          {"calls_in_flight", front.in_flight.load()},
          {"sources", std::move(sources)},
          {"scopes", std::move(scopes)}};
}

// GET /metrics: the node's counters plus gauges read lock-free.
std::string metrics_text(http_front::impl& front) {
  std::string g;
  g += "# HELP sluice_breaker_state Breaker state per source (0 closed, 1 "
       "open, 2 half_open).\n# TYPE sluice_breaker_state gauge\n";
  std::string gen = "# HELP sluice_breaker_generation Breaker generation "
                    "(transitions + 1).\n# TYPE sluice_breaker_generation "
                    "gauge\n";
  std::string lim = "# HELP sluice_source_limit AIMD concurrency limit.\n# "
                    "TYPE sluice_source_limit gauge\n";
  for (auto& s : front.rt.sources()) {
    auto b = s.breaker.mirror->load();
    g += "sluice_breaker_state{source=\"" + s.name + "\"} " +
         std::to_string(static_cast<int>(b.state)) + "\n";
    gen += "sluice_breaker_generation{source=\"" + s.name + "\"} " +
           std::to_string(b.generation) + "\n";
    lim += "sluice_source_limit{source=\"" + s.name + "\"} " +
           std::to_string(s.tier->cap()) + "\n";
  }
  auto global = front.rt.tiers().global().status();
  g += gen + lim;
  g += "# HELP sluice_tier_in_use Permits in use.\n# TYPE sluice_tier_in_use "
       "gauge\nsluice_tier_in_use{tier=\"global\"} " +
       std::to_string(global.in_use) + "\n";
  g += "# HELP sluice_calls_in_flight Calls in flight.\n# TYPE "
       "sluice_calls_in_flight gauge\nsluice_calls_in_flight " +
       std::to_string(front.in_flight.load()) + "\n";
  return front.metrics.render(g);
}

// One client connection: reads requests one at a time, runs each as a
// governed call, writes the answer. A strand serialises everything on it.
class connection : public std::enable_shared_from_this<connection> {
public:
  connection(tcp::socket&& socket, http_front::impl& front)
      : stream_(std::move(socket))
      , front_(front)
      , tier_(front.rt.new_connection())
      , id_(front.next_connection++) {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connection_tiers.emplace(id_, tier_);
  }

  ~connection() {
    std::lock_guard<std::mutex> guard{front_.connections_mx};
    front_.connection_tiers.erase(id_);
  }

  void start() {
    net::dispatch(
        stream_.get_executor(),
        beast::bind_front_handler(&connection::do_read, shared_from_this()));
  }

private:
  // From any thread: runs `fn(connection&)` on the connection's strand,
  // unless the front has stopped its I/O or the connection is gone. Holds no
  // executor: callbacks kept by actors may outlive the front's io_context.
  template <class F>
  static void post_to(const std::shared_ptr<http_front::impl::post_gate>& gate,
                      const std::weak_ptr<connection>& weak, F fn) {
    std::lock_guard<std::mutex> guard{gate->mx};
    if (!gate->open)
      return;
    auto c = weak.lock();
    if (!c)
      return;
    auto exec = c->stream_.get_executor();
    net::post(exec, [c = std::move(c), fn = std::move(fn)]() mutable {
      fn(*c);
    });
  }

  void do_read() {
    parser_.emplace();
    parser_->body_limit(front_.settings.max_body_bytes);
    stream_.expires_after(read_timeout);
    // Read one request.
    http::async_read(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&connection::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::eof || ec == net::error::connection_reset)
      return close();
    if (ec == http::error::header_limit)
      return write(error_response(errc::headers_too_large,
                                  "request header exceeds 8192 bytes", false,
                                  11));
    if (ec == http::error::body_limit) {
      auto limit = std::to_string(front_.settings.max_body_bytes);
      return write(error_response(errc::payload_too_large,
                                  "request body exceeds " + limit + " bytes",
                                  false, 11));
    }
    if (ec)
      return write(error_response(errc::bad_request,
                                  "malformed HTTP request: " + ec.message(),
                                  false, 11));
    request_ = parser_->release();
    handle();
  }

  void handle() {
    auto keep = request_.keep_alive();
    auto version = request_.version();
    std::string target{request_.target()};
    auto path = target.substr(0, target.find('?'));
    if (path == "/healthz") {
      if (request_.method() != http::verb::get)
        return write(error_response(errc::method_not_allowed,
                                    "use GET /healthz", keep, version));
      return write(make_response(200, R"({"status":"ok"})", keep, version));
    }
    if (path == "/status") {
      if (request_.method() != http::verb::get)
        return write(error_response(errc::method_not_allowed, "use GET /status",
                                    keep, version));
      return start_status(keep, version);
    }
    if (path == "/events") {
      if (request_.method() != http::verb::get)
        return write(error_response(errc::method_not_allowed, "use GET /events",
                                    keep, version));
      return start_events(version);
    }
    if (path == "/metrics") {
      if (request_.method() != http::verb::get)
        return write(error_response(errc::method_not_allowed,
                                    "use GET /metrics", keep, version));
      auto res = make_response(200, metrics_text(front_), keep, version);
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      return write(std::move(res));
    }
    if (!front_.rt.has_route(path))
      return write(
          error_response(errc::not_found, "no route " + path, keep, version));
    if (request_.method() != http::verb::post)
      return write(error_response(errc::method_not_allowed, "use POST " + path,
                                  keep, version));
    auto body = json::parse(request_.body(), nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return write(error_response(
          errc::bad_request, "the body must be a JSON object", keep, version));
    auto stream = body.find("stream");
    if (stream != body.end() && !stream->is_boolean() && !stream->is_null())
      return write(error_response(errc::bad_request,
                                  "\"stream\" must be true or false", keep,
                                  version));
    call_request call{path, request_.body()};
    call.stream = stream != body.end() && stream->is_boolean() && *stream;
    keep_ = keep;
    version_ = version;
    call_options opts;
    auto header = request_.find("X-Session-Id");
    opts.session = header != request_.end()
                       ? std::string{header->value()}
                       : "connection-" + std::to_string(id_);
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
      return write(error_response(errc::bad_request, e.what(), keep, version));
    }
    watch_client();
  }

  // While the call runs, notice the client going away (its socket reads
  // EOF or fails). That cancels the call.
  void watch_client() {
    stream_.expires_never();
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        [self = shared_from_this(), seq = watch_seq_](beast::error_code ec) {
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
  }

  // The call is over: the front no longer keeps this connection alive.
  void forget_pending() {
    std::lock_guard<std::mutex> guard{front_.pending_mx};
    front_.pending_connections.erase(shared_from_this());
  }

  void on_result(call_result r) {
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
      front_.publish("verdict", v);
    }
    front_.metrics.record(route_, r,
                          std::chrono::steady_clock::now() - started_);
    if (closed_ || r.status == call_status::cancelled)
      return close();
    if (!streaming_)
      return write(render(r, keep_, version_));
    // The stream is under way: end it, with an error event if it broke.
    if (!r.ok()) {
      auto body = error_body(errc::upstream_error,
                             "the upstream's stream broke off; the answer is "
                             "incomplete");
      body["error"]["reason"] = r.reason;
      body["error"]["source"] = r.source;
      push_frame("event: error\ndata: " + body.dump() + "\n\n");
    }
    push_frame("", true);
  }

  // -- GET /status --------------------------------------------------------------

  // Asks the backend for each scope's progress age (never blocking an I/O
  // thread), then answers from the strand with current counts.
  void start_status(bool keep, unsigned version) {
    {
      // Kept alive until answered, or until the front stops.
      std::lock_guard<std::mutex> guard{front_.pending_mx};
      front_.pending_connections.insert(shared_from_this());
    }
    std::weak_ptr<connection> weak = shared_from_this();
    auto answer = [weak, gate = front_.gate, keep, version](json scopes) {
      post_to(gate, weak,
              [scopes = std::move(scopes), keep, version](connection& c) {
                c.forget_pending();
                c.write(make_response(
                    200, status_json(c.front_, scopes).dump(), keep, version));
              });
    };
    front_.rt.system().spawn(
        [scopes = front_.rt.scopes(), backend = front_.rt.backend(),
         answer](caf::event_based_actor* self) -> caf::behavior {
          auto ages = std::make_shared<json>(json::object());
          auto left = std::make_shared<size_t>(scopes.size());
          if (scopes.empty()) {
            answer(*ages);
            return {};
          }
          // Nothing else references this actor; it must live to see the
          // replies.
          auto keep = std::make_shared<caf::actor>(
              caf::actor_cast<caf::actor>(self));
          for (auto& scope : scopes) {
            auto done = [self, ages, left, answer, scope, keep](json age) {
              (*ages)[scope] = {{"progress_age_s", std::move(age)}};
              if (--*left > 0)
                return;
              answer(*ages);
              *keep = nullptr;
              self->quit();
            };
            self->request(backend, std::chrono::seconds{1},
                          progress_age_atom_v, scope)
                .then(
                    [done](const progress_age& a) {
                      // null: no call in the scope has succeeded yet.
                      done(a.age ? json(std::chrono::duration<double>(*a.age)
                                            .count())
                                 : json(nullptr));
                    },
                    [done](caf::error&) { done("backend unavailable"); });
          }
          return {[](caf::unit_t) {}};
        });
  }

  // -- streamed answers (a "stream": true call) -------------------------------

  // A piece of the answer: the first one sends the response header. From
  // here on the call cannot be retried; the governor knows.
  void on_chunk(std::string bytes) {
    if (closed_)
      return;
    if (!streaming_) {
      streaming_ = true;
      write_stream_header(keep_, version_);
    }
    push_frame(std::move(bytes));
  }

  // -- chunked streams: GET /events and streamed answers -----------------------

  static constexpr size_t max_queued_frames = 1024;

  // Sends a 200 `text/event-stream` header with chunked transfer; frames
  // pushed meanwhile wait for it.
  void write_stream_header(bool keep, unsigned version) {
    auto res = std::make_shared<http::response<http::empty_body>>(
        http::status::ok, version);
    res->set(http::field::server, "sluice-node");
    res->set(http::field::content_type, "text/event-stream");
    res->set(http::field::cache_control, "no-cache");
    res->keep_alive(keep);
    res->chunked(true);
    auto sr =
        std::make_shared<http::response_serializer<http::empty_body>>(*res);
    stream_.expires_never(); // a stream may be quiet for long
    writing_ = true;
    http::async_write_header(
        stream_, *sr,
        [self = shared_from_this(), res, sr](beast::error_code ec,
                                             std::size_t) {
          if (ec)
            return self->fail_stream();
          self->send_next_frame();
        });
  }

  // Queues one chunk of the stream (`last`: the terminating empty chunk).
  void push_frame(std::string bytes, bool last = false) {
    if (closed_)
      return;
    if (frames_.size() >= max_queued_frames)
      return fail_stream(); // a client that cannot keep up is dropped
    std::string chunk;
    if (!bytes.empty()) {
      char size[20];
      std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
      chunk = size + bytes + "\r\n";
    }
    if (last)
      chunk += "0\r\n\r\n";
    frames_.push_back({std::move(chunk), last});
    if (!writing_)
      send_next_frame();
  }

  void send_next_frame() {
    if (frames_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    net::async_write(
        stream_, net::buffer(frames_.front().bytes),
        [self = shared_from_this()](beast::error_code ec, std::size_t) {
          if (ec)
            return self->fail_stream();
          auto last = self->frames_.front().last;
          self->frames_.pop_front();
          if (last)
            return self->end_stream();
          self->send_next_frame();
        });
  }

  // The streamed answer is complete: the connection serves the next request.
  void end_stream() {
    streaming_ = false;
    writing_ = false;
    if (!keep_ || closed_)
      return close();
    do_read();
  }

  // The client is gone or too slow: a call in flight is cancelled.
  void fail_stream() {
    if (pending_)
      call_.cancel(); // the governor ends; permits come back
    closed_ = true;
    frames_.clear();
    beast::error_code ec;
    stream_.socket().close(ec);
  }

  void start_events(unsigned version) {
    // Subscribe before the header goes out, so a client that has seen the
    // header misses nothing published after it; events queue meanwhile.
    {
      std::weak_ptr<connection> weak = shared_from_this();
      std::lock_guard<std::mutex> guard{front_.events_mx};
      front_.event_subscribers.push_back(
          {std::weak_ptr<void>{weak}, [weak](std::string frame) {
             if (auto c = weak.lock())
               c->push_event(std::move(frame));
           }});
    }
    keep_ = false; // the stream ends when the client leaves
    write_stream_header(true, version);
    watch_event_client();
  }

  void push_event(std::string frame) {
    net::post(stream_.get_executor(), [self = shared_from_this(),
                                       frame = std::move(frame)]() mutable {
      self->push_frame(std::move(frame));
    });
  }

  void watch_event_client() {
    stream_.socket().async_wait(
        tcp::socket::wait_read,
        [self = shared_from_this()](beast::error_code ec) {
          if (ec)
            return self->fail_stream();
          auto& socket = self->stream_.socket();
          switch (peek_peer(socket)) {
          case peer_state::closed:
            return self->fail_stream();
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
  }

  void write(response res) {
    auto keep = res.keep_alive();
    auto sp = std::make_shared<response>(std::move(res));
    stream_.expires_after(write_timeout);
    // Write the response, then read the next request or close.
    http::async_write(stream_, *sp,
                      [self = shared_from_this(), sp,
                       keep](beast::error_code ec, std::size_t) {
                        if (ec || !keep)
                          return self->close();
                        self->do_read();
                      });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http_front::impl& front_;
  tier_handle tier_;
  uint64_t id_;
  call_handle call_;
  std::string route_;
  std::chrono::steady_clock::time_point started_;
  bool pending_ = false;
  bool closed_ = false;
  /// The request being answered: keep-alive and HTTP version.
  bool keep_ = true;
  unsigned version_ = 11;
  /// Guards the disconnect watch of one call against later ones.
  uint64_t watch_seq_ = 0;
  /// A chunked stream is being written (its header is out or on its way).
  bool streaming_ = false;
  struct frame {
    std::string bytes;
    bool last;
  };
  std::deque<frame> frames_;
  bool writing_ = false;
};

} // namespace

namespace {

// Subscribes to every breaker; hands each transition to `on_event`.
caf::behavior event_relay(caf::event_based_actor* self,
                          std::vector<source_handle> sources,
                          std::function<void(const breaker_event&)> on_event) {
  for (auto& s : sources)
    self->request(s.breaker.actor, caf::infinite, subscribe_atom_v)
        .then([](const breaker_status&) {}, [](caf::error&) {});
  return {
      [on_event](const breaker_event& ev) { on_event(ev); },
  };
}

} // namespace

void http_front::impl::do_accept() {
  acceptor.async_accept(
      net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
        if (!accepting)
          return;
        if (!ec)
          std::make_shared<connection>(std::move(socket), *this)->start();
        do_accept();
      });
}

http_front::http_front(runtime& rt, const node_settings& settings,
                       size_t threads)
    : impl_(std::make_unique<impl>(rt, settings)) {
  beast::error_code ec;
  auto address = net::ip::make_address(settings.listen_host, ec);
  if (ec)
    throw std::runtime_error("cannot listen on '" + settings.listen_host +
                             "': " + ec.message());
  tcp::endpoint ep{address, settings.listen_port};
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec)
    a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(ep, ec);
  if (!ec)
    a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + settings.listen_host + ":" +
                             std::to_string(settings.listen_port) + ": " +
                             ec.message());
  auto* state = impl_.get();
  impl_->event_relay = rt.system().spawn(
      event_relay, rt.sources(), [state](const breaker_event& ev) {
        // Wall-clock time of the transition (the event carries steady time).
        auto wall =
            std::chrono::system_clock::now() -
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                steady::now() - ev.at);
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      wall.time_since_epoch())
                      .count();
        state->publish("breaker",
                       {{"source", ev.source},
                        {"from", std::string{policy::to_string(ev.from)}},
                        {"to", std::string{policy::to_string(ev.to)}},
                        {"generation", ev.generation},
                        {"at_ms", ms}});
      });
  impl_->do_accept();
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i)
    impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

http_front::~http_front() {
  shutdown(duration::zero());
}

uint16_t http_front::port() const noexcept {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

size_t http_front::in_flight() const noexcept {
  return impl_->in_flight;
}

size_t http_front::shutdown(duration grace) {
  if (impl_->threads.empty())
    return 0;
  impl_->accepting = false;
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (impl_->in_flight > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  size_t left = impl_->in_flight;
  {
    // The relay calls into this object: wait until it is gone.
    caf::scoped_actor self{impl_->rt.system()};
    self->monitor(impl_->event_relay);
    self->send_exit(impl_->event_relay, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }
  {
    // Results still on their way are dropped from here on.
    std::lock_guard<std::mutex> guard{impl_->gate->mx};
    impl_->gate->open = false;
  }
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    t.join();
  impl_->threads.clear();
  {
    // Cut-off calls: their connections go now, while the io_context exists.
    std::lock_guard<std::mutex> guard{impl_->pending_mx};
    impl_->pending_connections.clear();
  }
  return left;
}

} // namespace sluice
