#pragma once

// The engine behind `http_client`, private to it: a keep-alive pool and the
// exchanges in flight, on the loop it is handed. Everything it does runs on
// that loop's thread. Its members are defined by job: its life and the
// client (http_client.cpp), getting a connection (http_engine_connect.cpp),
// one request and its answer (http_engine_exchange.cpp).
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

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <caf/actor.hpp>

#include "sluice/actors/loops/io_time.hpp"
#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/upstream/connection.hpp"
#include "sluice/actors/upstream/http_client.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/actors/upstream/response.hpp"
#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/runtime/policy/source/exchange_deadline.hpp"
#include "sluice/runtime/policy/source/pool_target.hpp"

namespace sluice::upstream {

class http_client::engine
    : public std::enable_shared_from_this<http_client::engine> {
public:
  using done_fn = std::function<void(source_reply)>;

  /// Throws when the resolver cannot be made (no file descriptors).
  engine(boost::asio::io_context& loop, io_time& time,
         const http_source_config& cfg,
         std::shared_ptr<http_source_stats> stats);

  /// Whether the calling thread runs this engine's loop now.
  bool on_loop() const noexcept {
    return ioc_.get_executor().running_in_this_thread();
  }

  /// Starts the exchange now when called on the engine's loop (a governor
  /// on that loop: its request goes out in the same round), else posts it
  /// there. `done` may be called before this returns.
  void start(uint64_t id, call_request req, done_fn done);

  /// `done` is taken once the exchange is made (a throw leaves it).
  void start_here(uint64_t id, call_request req, done_fn& done);

  /// The requester is gone: close its upstream request now.
  void cancel(uint64_t id);

  /// The client is gone: every exchange ends, answered `transient` ("the
  /// source stopped": a governor that started it itself waits for no
  /// actor that could fail its request instead), and the pool closes, so
  /// the handlers that hold the engine run (aborted) and go.
  void close();

private:
  struct exchange {
    uint64_t id = 0;
    std::unique_ptr<upstream::connection> stream;
    bool reused = false;
    boost::beast::http::request<boost::beast::http::string_body, http_fields>
        req;
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
                    const char* what) noexcept;

  // -- getting a connection (http_engine_connect.cpp) ----------------------

  void expire_at(const exchange_ptr& ex, time_point at);
  static boost::beast::error_code step_result(const exchange& ex,
                                              boost::beast::error_code ec);
  bool past_deadline(const exchange& ex) const;
  upstream::response_limits limits_for(const exchange& ex) const;
  void begin(const exchange_ptr& ex, call_request call);
  const std::string& target_of(const std::string& route);
  void connect_or_reuse(const exchange_ptr& ex);
  void handshake(const exchange_ptr& ex);
  void setup_failed(const exchange_ptr& ex);

  // -- one request and its answer (http_engine_exchange.cpp) ----------------

  bool arm(const exchange_ptr& ex);
  void send(const exchange_ptr& ex);
  void read_more(const exchange_ptr& ex);
  void on_read(const exchange_ptr& ex, boost::beast::error_code ec,
               std::size_t n);
  void pass_on(const exchange_ptr& ex);
  void retry_or_fail(const exchange_ptr& ex, boost::beast::error_code ec,
                     const char* step);
  static std::string read_timeout_reason(const exchange& ex);
  bool retire(const exchange_ptr& ex);
  void fail(const exchange_ptr& ex, policy::outcome_kind kind);
  void finish(const exchange_ptr& ex);

  http_source_config cfg_;
  policy::exchange_timeouts timeouts_;
  parsed_url url_;
  /// The Host header: `host[:port]`, the port left out when it is 80.
  std::string host_header_;
  /// Names the source in log lines (no userinfo: `validate` refuses it).
  std::string where_;
  /// An https:// source's TLS context (null: plain TCP), the name its
  /// upstream's certificate must hold (and SNI), and whether it is checked.
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::string peer_name_;
  bool verify_ = true;
  /// The upstream's address when `base_url` names one (no resolving).
  std::optional<boost::asio::ip::tcp::endpoint> endpoint_;
  std::vector<std::pair<std::string, std::string>> headers_;
  /// `target_of`'s last route and its target.
  std::string target_route_;
  std::string target_;
  std::shared_ptr<http_source_stats> stats_;
  boost::asio::io_context& ioc_;
  io_time& time_;
  boost::asio::ip::tcp::resolver resolver_;
  std::deque<std::unique_ptr<upstream::connection>> idle_;
  std::unordered_map<uint64_t, exchange_ptr> active_;
  /// How many connections, in use and idle, the pool keeps.
  policy::pool_target pool_{cfg_.max_idle_connections};
};

} // namespace sluice::upstream
