#include "sluice/actors/http_source.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
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

#include "sluice/actors/attempt_book.hpp"
#include "sluice/actors/upstream_connection.hpp"
#include "sluice/actors/upstream_response.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/runtime/policy/host_port.hpp"
#include "sluice/runtime/policy/http_outcome.hpp"

namespace sluice {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

struct parsed_url {
  std::string host; // without brackets
  std::string port;
  std::string prefix;
  bool https = false;
};

// A character of a TLS server name that is not an IP address.
bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
         c == '_';
}

// The parts of an `http[s]://HOST[:PORT][/PREFIX]` URL, or why it is
// refused (in `why`).
std::optional<parsed_url> parse_url(const std::string& url, std::string& why) {
  parsed_url u;
  u.https = url.compare(0, 8, "https://") == 0;
  const std::string scheme = u.https ? "https://" : "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    why = "must be http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH]";
    return std::nullopt;
  }
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string::npos) {
    why = "no userinfo (user:password@) in the URL: put credentials in "
          "headers";
    return std::nullopt;
  }
  // The authority is HOST[:PORT] or [V6][:PORT]: the config's one parser
  // (runtime/policy/host_port), with the scheme's port as the default and
  // port 0 refused (nothing to connect to).
  try {
    auto hp = parse_host_port(authority, {uint16_t(u.https ? 443 : 80), 1});
    u.host = std::move(hp.host);
    u.port = std::to_string(hp.port);
  } catch (const std::invalid_argument& e) {
    why = std::string{e.what()} + " (http[s]://HOST[:PORT][/PATH], an IPv6 "
                                  "HOST in brackets)";
    return std::nullopt;
  }
  for (char c : u.prefix)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' ||
        c == '#') {
      why = "the path may not hold spaces, control characters, '?' or '#'";
      return std::nullopt;
    }
  if (!u.prefix.empty() && u.prefix.back() == '/')
    u.prefix.pop_back();
  return u;
}

// `text` (OpenSSL's reasons, our own words) fit inside a JSON string.
std::string json_safe(const std::string& text) {
  std::string out;
  for (char c : text)
    if (c == '"' || c == '\\')
      out += '\'';
    else if (static_cast<unsigned char>(c) >= 0x20 &&
             static_cast<unsigned char>(c) < 0x7f)
      out += c;
  return out;
}

// Names a source in log lines: `NAME (URL)`, or the URL alone.
std::string log_label(const http_source_config& cfg) {
  return cfg.log_name.empty() ? cfg.base_url
                              : cfg.log_name + " (" + cfg.base_url + ")";
}

std::string header_value(const std::string& v) {
  if (v.compare(0, 4, "env:") == 0) {
    auto x = std::getenv(v.substr(4).c_str());
    return x ? x : "";
  }
  return v;
}

// A caller's header (`call_request::headers`) may go upstream: not one of
// the names the source owns (framing, routing, its credentials), and no
// byte that could end the header line or the field name early (the caller
// validated them; this keeps a slip from splitting the request).
bool forwardable(const std::string& name, const std::string& value) {
  // Framing, hop-by-hop and credential headers: never a caller's.
  static constexpr const char* owned[] = {
      "host",          "authorization",     "content-length",
      "content-type",  "transfer-encoding", "connection",
      "expect",        "te",                "upgrade",
      "keep-alive",    "proxy-connection",  "trailer",
      "content-encoding", "proxy-authorization", "api-key",
      "x-api-key",     "cookie"};
  if (name.empty())
    return false;
  for (auto own : owned)
    if (beast::iequals(name, own))
      return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view{"!#$%&'*+-.^_`|~"}.find(c) == std::string_view::npos)
      return false;
  // Visible ASCII, space and tab only (RFC 9110 field-value, without
  // obs-text): no control byte, no DEL.
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f)
      return false;
  }
  return true;
}

} // namespace

std::string upstream_target(std::string_view base_path,
                            std::string_view route) {
  // Segments are what lies between slashes: "/a/b" holds "a" and "b".
  auto segments = [](std::string_view path) {
    std::vector<std::string_view> out;
    while (!path.empty() && path.front() == '/') {
      path.remove_prefix(1);
      auto end = std::min(path.find('/'), path.size());
      out.push_back(path.substr(0, end));
      path.remove_prefix(end);
    }
    return out;
  };
  auto base = segments(base_path);
  auto head = segments(route);
  std::string out{base_path};
  if (route.empty() || route.front() != '/' || head.size() < 2) {
    out += route;
    return out;
  }
  for (auto k = std::min(base.size(), head.size() - 1); k > 0; --k)
    if (std::equal(base.end() - k, base.end(), head.begin())) {
      // Skip the route's first k segments, each with its leading '/'.
      size_t skip = 0;
      for (size_t i = 0; i < k; ++i)
        skip += 1 + head[i].size();
      out += route.substr(skip);
      return out;
    }
  out += route;
  return out;
}

void validate(const http_source_config& cfg) {
  std::string why;
  if (!parse_url(cfg.base_url, why))
    throw std::invalid_argument("base_url: " + why + " (got '" + cfg.base_url +
                                "')");
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
  if (cfg.max_body_bytes == 0)
    throw std::invalid_argument("max_body_bytes: must be positive");
  if (cfg.max_error_body_bytes == 0)
    throw std::invalid_argument("max_error_body_bytes: must be positive");
  if (cfg.tls && !parse_url(cfg.base_url, why)->https)
    throw std::invalid_argument(
        "tls: TLS settings need an https:// base_url (got '" + cfg.base_url +
        "')");
  if (cfg.tls) {
    try {
      validate(*cfg.tls);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("tls." + std::string{e.what()});
    }
  }
}

void validate(const http_tls_config& cfg) {
  if (!cfg.server_name.empty()) {
    beast::error_code not_an_address;
    net::ip::make_address(cfg.server_name, not_an_address);
    auto& name = cfg.server_name;
    if (not_an_address && !std::all_of(name.begin(), name.end(), is_host_char))
      throw std::invalid_argument(
          "server_name: a host name (letters, digits, '-', '.', '_') or an "
          "IP address");
  }
  upstream::make_tls_context(cfg); // checks the files, then is dropped
}

namespace {

// The Beast side: an I/O thread, a keep-alive pool, the exchanges in flight.
// Everything below runs on that one thread.
//
// Owned by its source actor alone: the actor's state destroys it (through
// `dispose`), which stops and joins the I/O thread first, so no handler ever
// runs after the destruction. Handlers therefore capture `this`.
//
// No exception leaves a handler: each is wrapped by `guarded`, which fails
// its exchange as `transient` (SPEC §7); the thread's `run()` loop catches
// whatever still gets through and keeps the loop running.
class client_engine {
public:
  using done_fn = std::function<void(source_reply)>;

private:
  using clock_type = std::chrono::steady_clock;

  struct exchange {
    uint64_t id = 0;
    std::unique_ptr<upstream::connection> stream;
    bool reused = false;
    http::request<http::string_body> req;
    /// The answer being read (a new one per request sent).
    std::optional<upstream::response_reader> reader;
    done_fn done;
    /// Where a streamed call's bytes go (unset: a unary call).
    caf::actor stream_to;
    uint64_t tag = 0;
    clock_type::time_point sent{};
    /// The attempt's own deadline (`call_request::timeout`), if it has one.
    std::optional<clock_type::time_point> deadline;
    /// Why the connection could not be set up, for the reply's body (a
    /// TLS refusal's reason; empty: the generic note).
    std::string setup_failure;
  };
  using exchange_ptr = std::shared_ptr<exchange>;

  // Wraps a handler of `ex` so that no exception leaves it: one that is
  // thrown fails `ex` as transient (closing its connection).
  template <class F>
  auto guarded(const exchange_ptr& ex, const char* step, F f) {
    return [this, ex, step, f = std::move(f)](auto&&... xs) mutable {
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
  /// Throws when the I/O machinery cannot be built (no file descriptors, no
  /// thread): better now, at the source's start, than at its first call.
  client_engine(const http_source_config& cfg,
                std::shared_ptr<http_source_stats> stats)
      : cfg_(cfg)
      , stats_(std::move(stats))
      , work_(net::make_work_guard(ioc_))
      , resolver_(ioc_) {
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
    // Asio builds its reactor (an epoll descriptor, an eventfd, a timerfd)
    // on the first socket or timer of an io_context. A source used only on
    // failover would otherwise build it at its first call -- perhaps when
    // the process has no descriptor left, and Asio throws from deep inside
    // a handler then. A stream (socket and timer) built now builds it now.
    { beast::tcp_stream warm{ioc_}; }
    thread_ = std::thread{[this] { run(); }};
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
      auto ex = std::make_shared<exchange>();
      ex->id = id;
      ex->done = std::move(done);
      self->guarded(ex, "start",
                    [self, ex, &req] { self->begin(ex, std::move(req)); })();
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
      if (ex->stream)
        ex->stream->close();
      ++self->stats_->cancelled;
    });
  }

private:
  // The I/O thread. An exception out of `run()` is a handler that escaped
  // its guard: log it and keep serving the other exchanges.
  void run() noexcept {
    for (;;) {
      try {
        ioc_.run();
        return; // stopped
      } catch (const std::exception& e) {
        static log_limit lim;
        log_limited(lim, spdlog::level::err,
                    "http source {}: I/O loop caught: {}", where_, e.what());
      } catch (...) {
        static log_limit lim;
        log_limited(lim, spdlog::level::err,
                    "http source {}: I/O loop caught an unknown exception",
                    where_);
      }
    }
  }

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
      ex->deadline = clock_type::now() + call.timeout;
    active_[ex->id] = ex;
    ex->req = {http::verb::post, upstream_target(url_.prefix, call.route), 11};
    ex->req.set(http::field::host, host_header_);
    ex->req.set(http::field::content_type, "application/json");
    ex->req.set(http::field::user_agent, "sluice");
    for (auto& [name, value] : headers_)
      ex->req.set(name, value);
    // The caller's headers come after the source's own and never replace
    // one of them: a name the source set (its config included) or owns is
    // skipped; the rest are added as given, repeats kept (tracestate).
    std::vector<const std::pair<std::string, std::string>*> extra;
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

  void connect_or_reuse(const exchange_ptr& ex) {
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
      if (ec) {
        static log_limit lim;
        log_limited(lim, spdlog::level::info,
                    "http source {}: connect failed: {}", where_, ec.message());
        return setup_failed(ex);
      }
      ++stats_->connections_opened;
      if (ex->stream->secure())
        return handshake(ex);
      send(ex);
    };
    if (endpoint_) {
      // An address: nothing to resolve (and no resolver thread to start).
      ex->stream->tcp().expires_after(
          within_deadline(*ex, cfg_.connect_timeout));
      ex->stream->tcp().async_connect(*endpoint_,
                                      guarded(ex, "connect", connected));
      return;
    }
    // Resolve, then connect, each under the connect timeout.
    resolver_.async_resolve(
        url_.host, url_.port,
        guarded(ex, "resolve",
                [this, ex, connected](beast::error_code ec,
                                      tcp::resolver::results_type results) {
                  if (ec) {
                    static log_limit lim;
                    log_limited(lim, spdlog::level::info,
                                "http source {}: resolving failed: {}", where_,
                                ec.message());
                    return setup_failed(ex);
                  }
                  ex->stream->tcp().expires_after(
                      within_deadline(*ex, cfg_.connect_timeout));
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
      return setup_failed(ex);
    }
    ex->stream->tcp().expires_after(within_deadline(*ex, cfg_.connect_timeout));
    ex->stream->async_handshake(
        guarded(ex, "handshake", [this, ex](beast::error_code ec) {
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
            return setup_failed(ex);
          }
          auto why = ec == beast::error::timeout ? std::string{"timed out"}
                                                 : ec.message();
          static log_limit lim;
          log_limited(lim, spdlog::level::info,
                      "http source {}: TLS handshake failed: {}", where_, why);
          ex->setup_failure = "upstream TLS handshake failed: " + why;
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

  // The next read's deadline: the first body byte within
  // `first_byte_timeout` of sending, later ones within `idle_timeout` of the
  // last, and everything within `response_timeout`.
  void arm(const exchange_ptr& ex) {
    auto now = clock_type::now();
    auto until = ex->sent + cfg_.response_timeout;
    if (ex->deadline)
      until = std::min(until, *ex->deadline);
    auto next = ex->reader->body_bytes() == 0
                    ? ex->sent + cfg_.first_byte_timeout
                    : now + cfg_.idle_timeout;
    ex->stream->tcp().expires_after(std::min(until, next) - now);
  }

  void send(const exchange_ptr& ex) {
    ex->sent = clock_type::now();
    ex->stream->tcp().expires_after(
        within_deadline(*ex, cfg_.first_byte_timeout));
    ex->reader.emplace(limits_for(*ex));
    // Write the request, then read the answer as it comes.
    http::async_write(
        *ex->stream, ex->req,
        guarded(ex, "write", [this, ex](beast::error_code ec, std::size_t) {
          if (ec)
            return retry_or_fail(ex, ec);
          read_more(ex);
        }));
  }

  void read_more(const exchange_ptr& ex) {
    if (!ex->done)
      return; // cancelled
    arm(ex);
    ex->stream->async_read_some(
        ex->reader->prepare(),
        guarded(ex, "read", [this, ex](beast::error_code ec, std::size_t n) {
          on_read(ex, ec, n);
        }));
  }

  void on_read(const exchange_ptr& ex, beast::error_code ec, std::size_t n) {
    if (!ex->done)
      return; // cancelled
    auto& rd = *ex->reader;
    if (n > 0) {
      rd.commit(n);
      pass_on(ex);
    }
    if (rd.verdict() == upstream::read_verdict::reading && ec) {
      if (!upstream::is_end_of_stream(ec) ||
          (ex->reused && !rd.received_any()))
        return retry_or_fail(ex, ec);
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
  void retry_or_fail(const exchange_ptr& ex, beast::error_code ec) {
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
    }
    fail(ex, ec == beast::error::timeout ? policy::outcome_kind::timeout
                                         : policy::outcome_kind::transient);
  }

  void fail(const exchange_ptr& ex, policy::outcome_kind kind) {
    if (!ex->done)
      return;
    active_.erase(ex->id);
    if (ex->stream)
      ex->stream->close();
    source_reply r;
    r.kind = kind;
    if (ex->reader && ex->reader->header_done()) {
      r.status = ex->reader->status();
      r.body = kind == policy::outcome_kind::timeout
                   ? R"({"error":"upstream went silent in its answer"})"
                   : R"({"error":"upstream closed its answer early"})";
    } else if (!ex->setup_failure.empty()) {
      r.body = R"({"error":")" + json_safe(ex->setup_failure) + R"("})";
    } else {
      r.body = kind == policy::outcome_kind::timeout
                   ? R"({"error":"upstream did not answer in time"})"
                   : R"({"error":"upstream unreachable"})";
    }
    auto done = std::move(ex->done);
    done(std::move(r));
  }

  // The reading ended (complete, too large, or a framing error).
  void finish(const exchange_ptr& ex) {
    if (!ex->done)
      return;
    active_.erase(ex->id);
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
    auto r = upstream::make_reply(rd, std::chrono::system_clock::now());
    if (rd.reusable() && idle_.size() < cfg_.max_idle_connections) {
      idle_.push_back(std::move(ex->stream));
    } else {
      ex->stream->close();
    }
    auto done = std::move(ex->done);
    done(std::move(r));
  }

  http_source_config cfg_;
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
  std::shared_ptr<http_source_stats> stats_;
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  tcp::resolver resolver_;
  std::thread thread_;
  std::deque<std::unique_ptr<upstream::connection>> idle_;
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
  http_source_config cfg;
  std::unique_ptr<client_engine> engine;
  std::shared_ptr<http_source_stats> stats;
  uint64_t next_id = 1;
  attempt_book<pending> attempts;

  ~http_source_state() { client_engine::dispose(std::move(engine)); }

  /// The engine, built now if it is not yet (its first build failed: no
  /// descriptor or thread to spare then); null if it still cannot be.
  client_engine* ensure_engine() noexcept {
    if (engine)
      return engine.get();
    try {
      engine = std::make_unique<client_engine>(cfg, stats);
    } catch (const std::exception& e) {
      static log_limit lim;
      log_limited(lim, spdlog::level::err,
                  "http source {}: cannot start its I/O: {}", cfg.base_url,
                  e.what());
    }
    return engine.get();
  }

  static inline const char* name = "sluice.http_source";
};

using http_actor = caf::stateful_actor<http_source_state>;

source_reply cannot_attempt() {
  source_reply r;
  r.kind = policy::outcome_kind::transient;
  r.body = R"({"error":"upstream unreachable"})";
  return r;
}

caf::behavior http_source_actor(http_actor* self, http_source_config cfg,
                                std::shared_ptr<http_source_stats> stats) {
  self->state.cfg = std::move(cfg);
  self->state.stats = stats;
  self->state.ensure_engine(); // now, not at the first call (see the engine)
  // A requester that terminated, or sent `cancel_atom`, cancelled its
  // attempts: close them upstream.
  auto drop = [self](const caf::actor_addr& requester) {
    auto& st = self->state;
    for (auto id : st.attempts.drop_requester(requester)) {
      try {
        if (st.engine)
          st.engine->cancel(id);
      } catch (const std::exception& e) {
        static log_limit lim;
        log_limited(lim, spdlog::level::warn,
                    "http source {}: cancelling an attempt failed: {}",
                    st.cfg.base_url, e.what());
      }
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
        auto engine = st.ensure_engine();
        if (!engine)
          return cannot_attempt();
        ++st.stats->in_flight;
        auto id = st.next_id++;
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto promise = self->make_response_promise();
        st.attempts.add(self, id, pending{promise, requester});
        // Weak: an answer in flight never keeps the source alive, so the
        // I/O thread never drops its last reference (an actor destroyed
        // there, while its actor system shuts down, read a dead clock).
        auto me = caf::actor_cast<caf::actor_addr>(self);
        try {
          engine->start(id, req, [me, id](source_reply r) {
            // On the I/O thread: hand the answer to the actor, if it lives.
            if (auto strong = caf::actor_cast<caf::actor>(me))
              caf::anon_send(strong, http_done_atom::value, id, std::move(r));
          });
        } catch (const std::exception& e) {
          static log_limit lim;
          log_limited(lim, spdlog::level::warn,
                      "http source {}: starting an attempt failed: {}",
                      st.cfg.base_url, e.what());
          if (auto p = st.attempts.take(self, id)) {
            --st.stats->in_flight;
            p->promise.deliver(cannot_attempt());
          }
        }
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
  std::string why;
  bool tls = parse_url(cfg.base_url, why)->https;
  bool verify = !cfg.tls || cfg.tls->verify;
  // At start, once per source, on the caller's thread: not rate-limited.
  if (!verify)
    logger().warn("http source {}: tls.verify = false: the upstream's "
                  "certificate is NOT checked; anyone on the path can read "
                  "and change this source's traffic",
                  log_label(cfg));
  auto stats = std::make_shared<http_source_stats>();
  auto a = sys.spawn(http_source_actor, std::move(cfg), stats);
  return {caf::actor_cast<source_actor>(a), std::move(stats), tls, verify};
}

} // namespace sluice
