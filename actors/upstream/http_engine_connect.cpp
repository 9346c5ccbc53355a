// The engine's connections: taken from the pool or set up (resolved,
// connected, the TLS handshake), each step under its deadline.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/container/small_vector.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/upstream/http_engine.hpp"
#include "sluice/actors/wire/tcp_options.hpp"

namespace sluice::upstream {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// The current step of `ex` must be done by `at`; else the connection is
// closed under it (the alarm holds the exchange weakly: it may be gone).
void http_client::engine::expire_at(const exchange_ptr& ex, time_point at) {
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
beast::error_code http_client::engine::step_result(const exchange& ex,
                                                   beast::error_code ec) {
  return ex.timed_out ? beast::error_code{beast::error::timeout} : ec;
}

bool http_client::engine::past_deadline(const exchange& ex) const {
  return ex.deadline && deadline_passed(*ex.deadline, time_.now());
}

upstream::response_limits
http_client::engine::limits_for(const exchange& ex) const {
  upstream::response_limits lim;
  lim.max_body_bytes = cfg_.max_body_bytes;
  lim.max_error_body_bytes = cfg_.max_error_body_bytes;
  lim.stream_2xx = static_cast<bool>(ex.stream_to);
  return lim;
}

void http_client::engine::begin(const exchange_ptr& ex, call_request call) {
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
const std::string& http_client::engine::target_of(const std::string& route) {
  if (route != target_route_ || target_.empty()) {
    // Both or neither (a throw leaves the cache as it was).
    auto target = upstream_target(url_.prefix, route);
    auto copy = route;
    target_.swap(target);
    target_route_.swap(copy);
  }
  return target_;
}

void http_client::engine::connect_or_reuse(const exchange_ptr& ex) {
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
      guarded(
          ex, "resolve",
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
            expire_at(ex, setup_deadline(timeouts_, time_.now(), ex->deadline));
            ex->stream->tcp().async_connect(
                results,
                guarded(ex, "connect",
                        [connected](beast::error_code ec,
                                    const tcp::endpoint&) { connected(ec); }));
          }));
}

// The TLS handshake of a new connection, under its own connect timeout
// (it is part of setting the connection up). A refused certificate is
// logged with OpenSSL's reason, which an operator can act on (unknown
// CA, wrong name, expired), and that reason is the reply's body.
void http_client::engine::handshake(const exchange_ptr& ex) {
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
void http_client::engine::setup_failed(const exchange_ptr& ex) {
  fail(ex, past_deadline(*ex) ? policy::outcome_kind::timeout
                              : policy::outcome_kind::transient);
}

} // namespace sluice::upstream
