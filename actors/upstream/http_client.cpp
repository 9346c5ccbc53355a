#include "sluice/actors/upstream/http_client.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/container/small_vector.hpp>
#include <caf/actor.hpp>
#include <caf/send.hpp>

#include "sluice/actors/wire/handler_memory.hpp"
#include "sluice/actors/wire/http_head.hpp"
#include "sluice/actors/wire/piece_pool.hpp"
#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/actors/loops/io_time.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/actors/upstream/connection.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/actors/upstream/response.hpp"
#include "sluice/runtime/policy/source/exchange_deadline.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"
#include "sluice/runtime/policy/source/pool_target.hpp"

namespace sluice::upstream {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// The Beast side: a keep-alive pool and the exchanges in flight, on the
// loop it is handed. Everything below runs on that loop's thread.
//
// Shared by its handlers: each holds the engine (`guarded`, the posts), so
// it lives until the last of them has run or been destroyed with its loop.
// The loop may be shared (the loop scheduler's) and keep running after the
// `http_client` is gone: the client's destruction posts `close`, which ends
// every exchange and drops the pool, and the engine goes with the handlers
// that close wakes.
//
// Every step's deadline is one alarm per exchange on the injected time:
// when it fires, the connection is closed, which ends the step's operation,
// and the step's handler reads that as a timeout (`step_result`).
//
// No exception leaves a handler: each is wrapped by `guarded`, which fails
// its exchange as `transient` (SPEC §7); the loop's runner catches whatever
// still gets through and keeps the loop running.
class http_client::engine
    : public std::enable_shared_from_this<http_client::engine> {
public:
  using done_fn = std::function<void(source_reply)>;

private:
  struct exchange {
    uint64_t id = 0;
    std::unique_ptr<upstream::connection> stream;
    bool reused = false;
    http::request<http::string_body, http_fields> req;
    /// `req`'s head, while it is written.
    std::string head;
    /// The answer being read (a new one per request sent).
    std::optional<upstream::response_reader> reader;
    done_fn done;
    /// Where a streamed call's bytes go (unset: a unary call).
    caf::actor stream_to;
    uint64_t tag = 0;
    time_point sent{};
    /// The attempt's own deadline (`call_request::timeout`), if it has one.
    std::optional<time_point> deadline;
    /// The current step's deadline, and whether it passed (it closed the
    /// connection under the step).
    std::unique_ptr<io_alarm> alarm;
    bool timed_out = false;
    /// Why the connection could not be set up, for the reply's body (a
    /// TLS refusal's reason; empty: the generic note).
    std::string setup_failure;
    /// Why it failed, in a few words (`source_reply::reason`); set where
    /// the failure is seen, else the generic one of `fail`.
    std::string reason;
  };
  using exchange_ptr = std::shared_ptr<exchange>;

  // Wraps a handler of `ex` so that no exception leaves it: one that is
  // thrown fails `ex` as transient (closing its connection).
  template <class F>
  auto guarded(const exchange_ptr& ex, const char* step, F f) {
    return [this, keep = shared_from_this(), ex, step,
            f = std::move(f)](auto&&... xs) mutable {
      // The governor it answers runs as it ends (on the loops).
      loop_turn turn;
      try {
        f(std::forward<decltype(xs)>(xs)...);
      } catch (const std::exception& e) {
        on_exception(ex, step, e.what());
      } catch (...) {
        on_exception(ex, step, "unknown exception");
      }
    };
  }

  void on_exception(const exchange_ptr& ex, const char* step,
                    const char* what) noexcept {
    try {
      static log_limit lim;
      log_limited(lim, spdlog::level::warn,
                  "http source {}: attempt failed in {}: {}", where_, step,
                  what);
      if (ex->stream)
        ex->stream->close();
      fail(ex, policy::outcome_kind::transient);
    } catch (...) {
      // Nothing left to do that could not throw again; the requester's
      // own deadline answers it.
    }
  }

public:
  engine(net::io_context& loop, io_time& time, const http_source_config& cfg,
         std::shared_ptr<http_source_stats> stats)
      : cfg_(cfg)
      , stats_(std::move(stats))
      , ioc_(loop)
      , time_(time)
      , resolver_(loop) {
    timeouts_.connect = cfg.connect_timeout;
    timeouts_.first_byte = cfg.first_byte_timeout;
    timeouts_.idle = cfg.idle_timeout;
    timeouts_.response = cfg.response_timeout;
    std::string why;
    url_ = *parse_url(cfg.base_url, why); // validated at spawn
    where_ = log_label(cfg);
    host_header_ = bracketed(url_.host);
    if (url_.port != (url_.https ? "443" : "80"))
      host_header_ += ":" + url_.port;
    if (url_.https) {
      auto tls = cfg.tls.value_or(http_tls_config{});
      tls_ = upstream::make_tls_context(tls);
      peer_name_ = tls.server_name.empty() ? url_.host : tls.server_name;
      verify_ = tls.verify;
    }
    beast::error_code ec;
    auto addr = net::ip::make_address(url_.host, ec);
    if (!ec)
      endpoint_ = tcp::endpoint{
          addr, static_cast<unsigned short>(std::stoul(url_.port))};
    for (auto& [name, value] : cfg.headers)
      headers_.emplace_back(name, header_value(value));
  }

  /// Whether the calling thread runs this engine's loop now.
  bool on_loop() const noexcept {
    return ioc_.get_executor().running_in_this_thread();
  }

  /// Starts the exchange now when called on the engine's loop (a governor
  /// on that loop: its request goes out in the same round), else posts it
  /// there. `done` may be called before this returns.
  void start(uint64_t id, call_request req, done_fn done) {
    if (on_loop())
      return start_here(id, std::move(req), done);
    net::post(ioc_, [self = shared_from_this(), id, req = std::move(req),
                     done = std::move(done)]() mutable {
      try {
        self->start_here(id, std::move(req), done);
      } catch (...) {
        // No memory for the exchange: the attempt fails now rather than
        // at its deadline.
        try {
          if (done)
            done(upstream::failure_reply(policy::outcome_kind::transient, 0,
                                         "the source could not start it"));
        } catch (...) {
          // its requester's own deadline answers it
        }
      }
    });
  }

  /// `done` is taken once the exchange is made (a throw leaves it).
  void start_here(uint64_t id, call_request req, done_fn& done) {
    auto ex = std::make_shared<exchange>();
    ex->id = id;
    ex->done = std::move(done);
    guarded(ex, "start", [this, ex, &req] { begin(ex, std::move(req)); })();
  }

  /// The requester is gone: close its upstream request now.
  void cancel(uint64_t id) {
    net::post(ioc_, [self = shared_from_this(), id] {
      auto i = self->active_.find(id);
      if (i == self->active_.end())
        return;
      auto ex = i->second;
      self->active_.erase(i);
      --self->stats_->in_flight;
      ex->done = nullptr; // nobody waits for it any more
      if (ex->alarm)
        ex->alarm->cancel();
      if (ex->stream)
        ex->stream->close();
      ++self->stats_->cancelled;
    });
  }

  /// The client is gone: every exchange ends, answered `transient` ("the
  /// source stopped": a governor that started it itself waits for no
  /// actor that could fail its request instead), and the pool closes, so
  /// the handlers that hold the engine run (aborted) and go.
  void close() {
    net::post(ioc_, [self = shared_from_this()] {
      auto active = std::move(self->active_);
      self->active_.clear();
      self->stats_->in_flight -= static_cast<int64_t>(active.size());
      for (auto& [id, ex] : active) {
        auto done = std::move(ex->done);
        if (ex->alarm)
          ex->alarm->cancel();
        if (ex->stream)
          ex->stream->close();
        if (!done)
          continue;
        try {
          done(upstream::failure_reply(policy::outcome_kind::transient, 0,
                                       "the source stopped"));
        } catch (...) {
          // its requester's own deadline answers it
        }
      }
      self->idle_.clear();
      self->resolver_.cancel();
    });
  }

private:
  // The current step of `ex` must be done by `at`; else the connection is
  // closed under it (the alarm holds the exchange weakly: it may be gone).
  void expire_at(const exchange_ptr& ex, time_point at) {
    if (!ex->alarm)
      ex->alarm = time_.make_alarm(ioc_);
    else if (ex->alarm->move_to(at))
      return; // the same handler: nothing made per read
    ex->alarm->set(at, [w = std::weak_ptr<exchange>{ex}] {
      if (auto ex = w.lock()) {
        ex->timed_out = true;
        if (ex->stream)
          ex->stream->close();
      }
    });
  }

  // How a step ended: a timeout when its deadline closed the connection
  // under it, whatever error that close gave the operation.
  static beast::error_code step_result(const exchange& ex,
                                       beast::error_code ec) {
    return ex.timed_out ? beast::error_code{beast::error::timeout} : ec;
  }

  bool past_deadline(const exchange& ex) const {
    return ex.deadline && deadline_passed(*ex.deadline, time_.now());
  }

  upstream::response_limits limits_for(const exchange& ex) const {
    upstream::response_limits lim;
    lim.max_body_bytes = cfg_.max_body_bytes;
    lim.max_error_body_bytes = cfg_.max_error_body_bytes;
    lim.stream_2xx = static_cast<bool>(ex.stream_to);
    return lim;
  }

  void begin(const exchange_ptr& ex, call_request call) {
    ex->stream_to = std::move(call.stream_to);
    ex->tag = call.stream_tag;
    if (call.timeout > duration::zero())
      ex->deadline = time_.now() + call.timeout;
    active_[ex->id] = ex;
    ++stats_->in_flight;
    pool_.record(active_.size(), time_.now());
    ex->req = {http::verb::post, target_of(call.route), 11};
    ex->req.set(http::field::host, host_header_);
    ex->req.set(http::field::content_type, "application/json");
    ex->req.set(http::field::user_agent, "sluice");
    for (auto& [name, value] : headers_)
      ex->req.set(name, value);
    // The caller's headers come after the source's own and never replace
    // one of them: a name the source set (its config included) or owns is
    // skipped; the rest are added as given, repeats kept (tracestate).
    boost::container::small_vector<const std::pair<std::string, std::string>*,
                                   max_call_headers>
        extra;
    for (auto& h : call.headers)
      if (extra.size() < max_call_headers && forwardable(h.first, h.second) &&
          ex->req.find(h.first) == ex->req.end())
        extra.push_back(&h);
    for (auto* h : extra)
      ex->req.insert(h->first, h->second);
    ex->req.keep_alive(true);
    ex->req.body() = std::move(call.payload);
    ex->req.prepare_payload();
    connect_or_reuse(ex);
  }

  // The upstream's target for `route`: the last one made is kept (a
  // source serves one route, or a few).
  const std::string& target_of(const std::string& route) {
    if (route != target_route_ || target_.empty()) {
      // Both or neither (a throw leaves the cache as it was).
      auto target = upstream_target(url_.prefix, route);
      auto copy = route;
      target_.swap(target);
      target_route_.swap(copy);
    }
    return target_;
  }

  void connect_or_reuse(const exchange_ptr& ex) {
    // A new connection starts with no deadline (resolving has none of its
    // own); one from the pool gets its write's.
    if (ex->alarm)
      ex->alarm->cancel();
    ex->timed_out = false;
    while (!idle_.empty()) {
      auto s = std::move(idle_.front());
      idle_.pop_front();
      if (auto why = s->reuse_problem()) {
        ++stats_->pool_discards;
        static log_limit lim;
        log_limited(lim, spdlog::level::info,
                    "http source {}: pooled connection discarded: {}", where_,
                    why);
        continue; // `s` closes here
      }
      ex->stream = std::move(s);
      ex->reused = true;
      ++stats_->connections_reused;
      return send(ex);
    }
    ex->reused = false;
    ex->stream = std::make_unique<upstream::connection>(ioc_, tls_.get());
    auto connected = [this, ex](beast::error_code ec) {
      if (!ex->done)
        return; // cancelled: a request may not go out after all
      ec = step_result(*ex, ec);
      if (ex->alarm)
        ex->alarm->cancel(); // each step sets its own deadline
      if (ec) {
        static log_limit lim;
        log_limited(lim, spdlog::level::info,
                    "http source {}: connect failed: {}", where_, ec.message());
        ex->reason = ec == beast::error::timeout ? "timeout: connect"
                                                 : "connect: " + ec.message();
        return setup_failed(ex);
      }
      ++stats_->connections_opened;
      set_no_delay(ex->stream->tcp().socket());
      if (ex->stream->secure())
        return handshake(ex);
      send(ex);
    };
    if (endpoint_) {
      // An address: nothing to resolve (and no resolver thread to start).
      expire_at(ex, setup_deadline(timeouts_, time_.now(), ex->deadline));
      ex->stream->tcp().async_connect(*endpoint_,
                                      guarded(ex, "connect", connected));
      return;
    }
    // Resolve, then connect under the connect timeout. NOTE: resolving has
    // no deadline of its own (Asio's resolver cannot be cut short per
    // lookup); the governor's attempt timeout answers the call meanwhile.
    resolver_.async_resolve(
        url_.host, url_.port,
        guarded(ex, "resolve",
                [this, ex, connected](beast::error_code ec,
                                      tcp::resolver::results_type results) {
                  if (!ex->done)
                    return; // cancelled while resolving
                  if (ec) {
                    static log_limit lim;
                    log_limited(lim, spdlog::level::info,
                                "http source {}: resolving failed: {}", where_,
                                ec.message());
                    ex->reason = "resolve: " + ec.message();
                    return setup_failed(ex);
                  }
                  expire_at(ex, setup_deadline(timeouts_, time_.now(),
                                               ex->deadline));
                  ex->stream->tcp().async_connect(
                      results, guarded(ex, "connect",
                                       [connected](beast::error_code ec,
                                                   const tcp::endpoint&) {
                                         connected(ec);
                                       }));
                }));
  }

  // The TLS handshake of a new connection, under its own connect timeout
  // (it is part of setting the connection up). A refused certificate is
  // logged with OpenSSL's reason, which an operator can act on (unknown
  // CA, wrong name, expired), and that reason is the reply's body.
  void handshake(const exchange_ptr& ex) {
    if (!ex->stream->expect_peer(peer_name_, verify_)) {
      ++stats_->tls_handshake_failures;
      ex->reason = "tls: the peer's name could not be set for verifying";
      return setup_failed(ex);
    }
    expire_at(ex, setup_deadline(timeouts_, time_.now(), ex->deadline));
    ex->stream->async_handshake(
        guarded(ex, "handshake", [this, ex](beast::error_code ec) {
          if (!ex->done)
            return; // cancelled, or the client closed: no failure to count
          ec = step_result(*ex, ec);
          if (!ec) {
            ++stats_->tls_handshakes;
            return send(ex);
          }
          ++stats_->tls_handshake_failures;
          auto refused = ex->stream->verify_failure();
          if (!refused.empty()) {
            ++stats_->tls_verify_failures;
            static log_limit lim;
            log_limited(lim, spdlog::level::warn,
                        "http source {}: TLS certificate of '{}' refused: {}",
                        where_, peer_name_, refused);
            ex->setup_failure = "upstream TLS certificate refused: " + refused;
            ex->reason = "tls: " + refused;
            return setup_failed(ex);
          }
          auto why = ec == beast::error::timeout ? std::string{"timed out"}
                                                 : ec.message();
          static log_limit lim;
          log_limited(lim, spdlog::level::info,
                      "http source {}: TLS handshake failed: {}", where_, why);
          ex->setup_failure = "upstream TLS handshake failed: " + why;
          ex->reason = ec == beast::error::timeout ? "timeout: tls handshake"
                                                   : "tls: " + why;
          setup_failed(ex);
        }));
  }

  // The connection could not be set up (resolving, connecting, the TLS
  // handshake): a connection failure, `transient`, unless the attempt's own
  // deadline ended it.
  void setup_failed(const exchange_ptr& ex) {
    fail(ex, past_deadline(*ex) ? policy::outcome_kind::timeout
                                : policy::outcome_kind::transient);
  }

  // The next read's deadline (`policy::read_deadline`). One already passed
  // fails the exchange now: an upstream whose bytes are always there when a
  // read starts would otherwise have each read set the alarm again before
  // it fires, and never time out.
  bool arm(const exchange_ptr& ex) {
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

  void send(const exchange_ptr& ex) {
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
    auto written = guarded(ex, "write",
                           [this, ex](beast::error_code ec, std::size_t) {
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

  void read_more(const exchange_ptr& ex) {
    if (!ex->done)
      return; // cancelled
    if (!arm(ex))
      return;
    ex->stream->async_read_some(
        ex->reader->prepare(),
        bind_memory(ex->stream->read_memory(),
                    guarded(ex, "read",
                            [this, ex](beast::error_code ec, std::size_t n) {
                              on_read(ex, ec, n);
                            })));
  }

  void on_read(const exchange_ptr& ex, beast::error_code ec, std::size_t n) {
    if (!ex->done)
      return; // cancelled
    ec = step_result(*ex, ec);
    auto& rd = *ex->reader;
    if (n > 0) {
      rd.commit(n);
      pass_on(ex);
    }
    if (rd.verdict() == upstream::read_verdict::reading && ec) {
      if (!upstream::is_end_of_stream(ec) ||
          (ex->reused && !rd.received_any()))
        return retry_or_fail(ex, ec, "read");
      rd.eof(); // an answer delimited by the close, or one cut short
      pass_on(ex);
    }
    if (rd.verdict() == upstream::read_verdict::reading)
      return read_more(ex);
    finish(ex);
  }

  // A streamed 2xx answer's bytes go on now; the governor relays them.
  void pass_on(const exchange_ptr& ex) {
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
  void retry_or_fail(const exchange_ptr& ex, beast::error_code ec,
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
  static std::string read_timeout_reason(const exchange& ex) {
    return ex.reader && ex.reader->body_bytes() > 0 ? "timeout: answer idle"
                                                    : "timeout: first byte";
  }

  void fail(const exchange_ptr& ex, policy::outcome_kind kind) {
    if (!ex->done)
      return;
    if (active_.erase(ex->id) != 0)
      --stats_->in_flight;
    if (ex->alarm)
      ex->alarm->cancel();
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
  void finish(const exchange_ptr& ex) {
    if (!ex->done)
      return;
    if (active_.erase(ex->id) != 0)
      --stats_->in_flight;
    if (ex->alarm)
      ex->alarm->cancel();
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
    auto r = upstream::make_reply(rd, std::chrono::system_clock::now(),
                                 cfg_.statuses);
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

  http_source_config cfg_;
  policy::exchange_timeouts timeouts_;
  parsed_url url_;
  /// The Host header: `host[:port]`, the port left out when it is 80.
  std::string host_header_;
  /// Names the source in log lines (no userinfo: `validate` refuses it).
  std::string where_;
  /// An https:// source's TLS context (null: plain TCP), the name its
  /// upstream's certificate must hold (and SNI), and whether it is checked.
  std::shared_ptr<net::ssl::context> tls_;
  std::string peer_name_;
  bool verify_ = true;
  /// The upstream's address when `base_url` names one (no resolving).
  std::optional<tcp::endpoint> endpoint_;
  std::vector<std::pair<std::string, std::string>> headers_;
  /// `target_of`'s last route and its target.
  std::string target_route_;
  std::string target_;
  std::shared_ptr<http_source_stats> stats_;
  net::io_context& ioc_;
  io_time& time_;
  tcp::resolver resolver_;
  std::deque<std::unique_ptr<upstream::connection>> idle_;
  std::unordered_map<uint64_t, exchange_ptr> active_;
  /// How many connections, in use and idle, the pool keeps.
  policy::pool_target pool_{cfg_.max_idle_connections};
};

// -- http_client ---------------------------------------------------------------

http_client::http_client(boost::asio::io_context& loop, io_time& time,
                         const http_source_config& cfg,
                         std::shared_ptr<http_source_stats> stats,
                         std::shared_ptr<loop_life> life)
    : engine_(std::make_shared<engine>(loop, time, cfg, std::move(stats)))
    , life_(std::move(life)) {
  // nop
}

http_client::~http_client() {
  try {
    if (!life_) {
      engine_->close();
      return;
    }
    std::lock_guard<std::mutex> guard{life_->mx};
    if (life_->alive) {
      engine_->close();
      return;
    }
    // The loop is gone: its sockets cannot be closed any more, nor freed.
    static_cast<void>(new std::shared_ptr<engine>(std::move(engine_)));
  } catch (...) {
    // No memory for the post: the exchanges end with their handlers, when
    // the loop stops.
  }
}

void http_client::start(uint64_t id, call_request req, done_fn done) {
  if (!life_ || engine_->on_loop()) { // on its loop, the loop is alive
    engine_->start(id, std::move(req), std::move(done));
    return;
  }
  // Under the token: a governor's state may cancel from any thread at any
  // time, the scheduler's last moments included.
  std::lock_guard<std::mutex> guard{life_->mx};
  if (life_->alive)
    engine_->start(id, std::move(req), std::move(done));
}

void http_client::cancel(uint64_t id) {
  if (!life_) {
    engine_->cancel(id);
    return;
  }
  std::lock_guard<std::mutex> guard{life_->mx};
  if (life_->alive)
    engine_->cancel(id);
}

} // namespace sluice::upstream
