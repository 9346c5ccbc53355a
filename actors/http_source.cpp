#include "actors/http_source.hpp"

#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/attempt_book.hpp"
#include "runtime/policy/http_outcome.hpp"

namespace sluice {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

struct parsed_url {
  std::string host;
  std::string port;
  std::string prefix;
};

std::optional<parsed_url> parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return std::nullopt;
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  parsed_url u;
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  auto colon = authority.rfind(':');
  u.host = authority.substr(0, colon);
  u.port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  if (u.host.empty() || u.port.empty())
    return std::nullopt;
  return u;
}

std::string header_value(const std::string& v) {
  if (v.compare(0, 4, "env:") == 0) {
    auto x = std::getenv(v.substr(4).c_str());
    return x ? x : "";
  }
  return v;
}

} // namespace

void validate(const http_source_config& cfg) {
  if (!parse_url(cfg.base_url))
    throw std::invalid_argument("base_url: must be http://HOST[:PORT][/PATH], "
                                "got '" +
                                cfg.base_url + "'");
  for (auto& [name, value] : cfg.headers)
    if (value.compare(0, 4, "env:") == 0 &&
        std::getenv(value.substr(4).c_str()) == nullptr)
      throw std::invalid_argument("headers." + name +
                                  ": environment variable " + value.substr(4) +
                                  " is not set");
  if (cfg.connect_timeout <= duration::zero())
    throw std::invalid_argument("connect_timeout: must be positive");
  if (cfg.first_byte_timeout <= duration::zero())
    throw std::invalid_argument("first_byte_timeout: must be positive");
  if (cfg.idle_timeout <= duration::zero())
    throw std::invalid_argument("idle_timeout: must be positive");
  if (cfg.response_timeout <= duration::zero())
    throw std::invalid_argument("response_timeout: must be positive");
}

namespace {

/// Largest unary answer held in memory; a streamed one has no limit.
constexpr uint64_t max_unary_body = 64 * 1024 * 1024;

// The Beast side: an I/O thread, a keep-alive pool, the exchanges in flight.
// Everything below runs on that one thread.
//
// Owned by its source actor alone: the actor's state destroys it (through
// `dispose`), which stops and joins the I/O thread first, so no handler ever
// runs after the destruction. Handlers therefore capture `this`.
class client_engine {
public:
  using done_fn = std::function<void(source_reply)>;

  client_engine(const http_source_config& cfg,
                std::shared_ptr<http_source_stats> stats)
      : cfg_(cfg)
      , url_(*parse_url(cfg.base_url))
      , stats_(std::move(stats))
      , work_(net::make_work_guard(ioc_))
      , resolver_(ioc_) {
    for (auto& [name, value] : cfg.headers)
      headers_.emplace_back(name, header_value(value));
    thread_ = std::thread{[this] { ioc_.run(); }};
  }

  ~client_engine() {
    work_.reset();
    ioc_.stop();
    if (thread_.joinable())
      thread_.join();
  }

  /// Destroys an engine. Usually on a CAF thread; but when a handler drops
  /// the last reference to the source actor (an answer's callback holds
  /// one), the actor and its engine go on the engine's own I/O thread,
  /// which cannot join itself: a helper thread does it once that handler
  /// has returned.
  static void dispose(std::unique_ptr<client_engine> e) {
    if (e && std::this_thread::get_id() == e->thread_.get_id()) {
      std::thread{[e = std::move(e)]() mutable { e.reset(); }}.detach();
      return;
    }
    e.reset();
  }

  void start(uint64_t id, call_request req, done_fn done) {
    net::post(ioc_, [self = this, id, req = std::move(req),
                     done = std::move(done)]() mutable {
      self->begin(id, std::move(req), std::move(done));
    });
  }

  /// The requester is gone: close its upstream request now.
  void cancel(uint64_t id) {
    net::post(ioc_, [self = this, id] {
      auto i = self->active_.find(id);
      if (i == self->active_.end())
        return;
      auto ex = i->second;
      self->active_.erase(i);
      ex->done = nullptr; // nobody waits for it any more
      beast::error_code ec;
      ex->stream->socket().close(ec);
      ++self->stats_->cancelled;
    });
  }

private:
  using clock_type = std::chrono::steady_clock;
  using parser_type = http::response_parser<http::string_body>;

  struct exchange {
    uint64_t id;
    std::unique_ptr<beast::tcp_stream> stream;
    bool reused = false;
    http::request<http::string_body> req;
    std::optional<parser_type> parser;
    beast::flat_buffer buffer;
    done_fn done;
    /// Where a streamed call's bytes go (unset: a unary call).
    caf::actor stream_to;
    uint64_t tag = 0;
    /// This answer is passed on as it arrives (streamed call, 2xx).
    bool streaming = false;
    /// The response header arrived (no more retries on a fresh connection).
    bool got_header = false;
    /// Body bytes seen so far.
    size_t body_bytes = 0;
    clock_type::time_point sent{};
    /// The attempt's own deadline (`call_request::timeout`), if it has one.
    std::optional<clock_type::time_point> deadline;
  };

  // `d`, but no later than the attempt's deadline.
  static clock_type::duration within_deadline(const exchange& ex,
                                              clock_type::duration d) {
    if (!ex.deadline)
      return d;
    return std::min(d, std::max(clock_type::duration::zero(),
                                *ex.deadline - clock_type::now()));
  }

  static bool past_deadline(const exchange& ex) {
    return ex.deadline && clock_type::now() >= *ex.deadline;
  }
  using exchange_ptr = std::shared_ptr<exchange>;

  void begin(uint64_t id, call_request call, done_fn done) {
    auto ex = std::make_shared<exchange>();
    ex->id = id;
    ex->done = std::move(done);
    ex->stream_to = std::move(call.stream_to);
    ex->tag = call.stream_tag;
    if (call.timeout > duration::zero())
      ex->deadline = clock_type::now() + call.timeout;
    const auto& route = call.route;
    auto& body = call.payload;
    ex->req = {http::verb::post, url_.prefix + route, 11};
    ex->req.set(http::field::host, url_.host);
    ex->req.set(http::field::content_type, "application/json");
    ex->req.set(http::field::user_agent, "sluice");
    for (auto& [name, value] : headers_)
      ex->req.set(name, value);
    ex->req.keep_alive(true);
    ex->req.body() = std::move(body);
    ex->req.prepare_payload();
    active_[id] = ex;
    connect_or_reuse(ex);
  }

  void connect_or_reuse(const exchange_ptr& ex) {
    if (!idle_.empty()) {
      ex->stream = std::move(idle_.front());
      idle_.pop_front();
      ex->reused = true;
      ++stats_->connections_reused;
      return send(ex);
    }
    ex->reused = false;
    ex->stream = std::make_unique<beast::tcp_stream>(ioc_);
    // Resolve, then connect, each under the connect timeout.
    resolver_.async_resolve(
        url_.host, url_.port,
        [self = this, ex](beast::error_code ec,
                                        tcp::resolver::results_type results) {
          if (ec)
            return self->fail(ex, policy::outcome_kind::transient);
          ex->stream->expires_after(
              within_deadline(*ex, self->cfg_.connect_timeout));
          ex->stream->async_connect(
              results, [self, ex](beast::error_code ec, const tcp::endpoint&) {
                if (ec)
                  return self->fail(ex, past_deadline(*ex)
                                            ? policy::outcome_kind::timeout
                                            : policy::outcome_kind::transient);
                ++self->stats_->connections_opened;
                self->send(ex);
              });
        });
  }

  // The next read's deadline: the first body byte within
  // `first_byte_timeout` of sending, later ones within `idle_timeout` of the
  // last, and everything within `response_timeout`.
  void arm(const exchange_ptr& ex) {
    auto now = clock_type::now();
    auto until = ex->sent + cfg_.response_timeout;
    if (ex->deadline)
      until = std::min(until, *ex->deadline);
    auto next = ex->body_bytes == 0 ? ex->sent + cfg_.first_byte_timeout
                                    : now + cfg_.idle_timeout;
    ex->stream->expires_after(std::min(until, next) - now);
  }

  void send(const exchange_ptr& ex) {
    ex->sent = clock_type::now();
    ex->stream->expires_after(within_deadline(*ex, cfg_.first_byte_timeout));
    ex->parser.emplace();
    // A streamed answer may run long; a unary one is held in memory. (Not
    // boost::none for "no limit": Beast 1.74 compares a Content-Length with
    // it and finds every length over the limit.)
    ex->parser->body_limit(ex->stream_to
                               ? std::numeric_limits<std::uint64_t>::max()
                               : max_unary_body);
    // Write the request, then read the header, then the body as it comes.
    http::async_write(
        *ex->stream, ex->req,
        [self = this, ex](beast::error_code ec, std::size_t) {
          if (ec)
            return self->retry_or_fail(ex, ec);
          self->arm(ex);
          http::async_read_header(
              *ex->stream, ex->buffer, *ex->parser,
              [self, ex](beast::error_code ec, std::size_t) {
                if (ec)
                  return self->retry_or_fail(ex, ec);
                ex->got_header = true;
                auto status = ex->parser->get().result_int();
                ex->streaming = ex->stream_to && status >= 200 && status < 300;
                self->read_body(ex);
              });
        });
  }

  void read_body(const exchange_ptr& ex) {
    if (!ex->done)
      return; // cancelled
    if (ex->parser->is_done())
      return finish(ex);
    arm(ex);
    http::async_read_some(
        *ex->stream, ex->buffer, *ex->parser,
        [self = this, ex](beast::error_code ec, std::size_t) {
          auto& body = ex->parser->get().body();
          if (ex->streaming) {
            // Pass the bytes on now; the governor relays them.
            if (!body.empty() && ex->done) {
              ex->body_bytes += body.size();
              caf::anon_send(ex->stream_to, stream_chunk_atom_v, ex->tag,
                             std::move(body));
            }
            body.clear();
          } else {
            ex->body_bytes = body.size();
          }
          if (ec)
            return self->retry_or_fail(ex, ec);
          self->read_body(ex);
        });
  }

  // A pooled connection the upstream had closed fails at once: try once more
  // on a fresh one. Anything else is the attempt's outcome.
  void retry_or_fail(const exchange_ptr& ex, beast::error_code ec) {
    if (!ex->done)
      return; // cancelled
    if (ex->reused && !ex->got_header && ec != beast::error::timeout) {
      ex->buffer.clear();
      return connect_or_reuse(ex);
    }
    fail(ex, ec == beast::error::timeout ? policy::outcome_kind::timeout
                                         : policy::outcome_kind::transient);
  }

  void fail(const exchange_ptr& ex, policy::outcome_kind kind) {
    if (!ex->done)
      return;
    active_.erase(ex->id);
    source_reply r;
    r.kind = kind;
    if (ex->got_header) {
      r.status = static_cast<int>(ex->parser->get().result_int());
      r.body = kind == policy::outcome_kind::timeout
                   ? R"({"error":"upstream went silent in its answer"})"
                   : R"({"error":"upstream closed its answer early"})";
    } else {
      r.body = kind == policy::outcome_kind::timeout
                   ? R"({"error":"upstream did not answer in time"})"
                   : R"({"error":"upstream unreachable"})";
    }
    auto done = std::move(ex->done);
    done(std::move(r));
  }

  void finish(const exchange_ptr& ex) {
    if (!ex->done)
      return;
    active_.erase(ex->id);
    auto& res = ex->parser->get();
    source_reply r;
    r.status = static_cast<int>(res.result_int());
    r.kind = policy::classify_http_status(r.status);
    auto ra = res.find(http::field::retry_after);
    if (ra != res.end())
      r.retry_after = policy::parse_retry_after(
          std::string_view{ra->value().data(), ra->value().size()},
          std::chrono::system_clock::now());
    r.body = std::move(res.body()); // empty when it was streamed
    if (auto ct = res.find(http::field::content_type); ct != res.end())
      r.content_type = std::string{ct->value()};
    if (res.keep_alive() && idle_.size() < cfg_.max_idle_connections)
      idle_.push_back(std::move(ex->stream));
    auto done = std::move(ex->done);
    done(std::move(r));
  }

  http_source_config cfg_;
  parsed_url url_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::shared_ptr<http_source_stats> stats_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  tcp::resolver resolver_;
  std::thread thread_;
  std::deque<std::unique_ptr<beast::tcp_stream>> idle_;
  std::unordered_map<uint64_t, exchange_ptr> active_;
};

// -- the source actor
// ----------------------------------------------------------

using http_done_atom = caf::atom_constant<caf::atom("httpdone")>;

struct pending {
  caf::response_promise promise;
  caf::actor_addr requester;
};

struct http_source_state {
  std::unique_ptr<client_engine> engine;
  std::shared_ptr<http_source_stats> stats;
  uint64_t next_id = 1;
  attempt_book<pending> attempts;

  ~http_source_state() { client_engine::dispose(std::move(engine)); }

  static inline const char* name = "sluice.http_source";
};

using http_actor = caf::stateful_actor<http_source_state>;

caf::behavior http_source_actor(http_actor* self, http_source_config cfg,
                                std::shared_ptr<http_source_stats> stats) {
  self->state.stats = stats;
  self->state.engine = std::make_unique<client_engine>(cfg, stats);
  // A requester that terminated, or sent `cancel_atom`, cancelled its
  // attempts: close them upstream.
  auto drop = [self](const caf::actor_addr& requester) {
    auto& st = self->state;
    for (auto id : st.attempts.drop_requester(requester)) {
      st.engine->cancel(id);
      --st.stats->in_flight;
    }
  };
  self->set_down_handler([drop](caf::down_msg& dm) { drop(dm.source); });
  return {
      [self, drop](cancel_atom) {
        drop(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [self](attempt_atom,
             const call_request& req) -> caf::result<source_reply> {
        auto& st = self->state;
        ++st.stats->attempts;
        ++st.stats->in_flight;
        auto id = st.next_id++;
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        st.attempts.add(self, id,
                        pending{self->make_response_promise(), requester});
        auto me = caf::actor_cast<caf::actor>(self);
        st.engine->start(id, req, [me, id](source_reply r) {
          // On the I/O thread: hand the answer to the actor.
          caf::anon_send(me, http_done_atom::value, id, std::move(r));
        });
        return caf::delegated<source_reply>{};
      },
      [self](http_done_atom, uint64_t id, source_reply& r) {
        auto& st = self->state;
        auto p = st.attempts.take(self, id);
        if (!p)
          return; // cancelled meanwhile
        --st.stats->in_flight;
        p->promise.deliver(std::move(r));
      },
  };
}

} // namespace

http_source spawn_http_source(caf::actor_system& sys, http_source_config cfg) {
  validate(cfg);
  auto stats = std::make_shared<http_source_stats>();
  auto a = sys.spawn(http_source_actor, std::move(cfg), stats);
  return {caf::actor_cast<source_actor>(a), std::move(stats)};
}

} // namespace sluice
