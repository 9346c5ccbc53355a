#include "sluice/actors/upstream/http_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/upstream/http_engine.hpp"
#include "sluice/runtime/policy/host_port.hpp"

namespace sluice::upstream {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// -- the engine's life
// ---------------------------------------------------------

http_client::engine::engine(net::io_context& loop, io_time& time,
                            const http_source_config& cfg,
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
    endpoint_ =
        tcp::endpoint{addr, static_cast<unsigned short>(std::stoul(url_.port))};
  for (auto& [name, value] : cfg.headers)
    headers_.emplace_back(name, header_value(value));
}

void http_client::engine::on_exception(const exchange_ptr& ex, const char* step,
                                       const char* what) noexcept {
  try {
    static log_limit lim;
    log_limited(lim, spdlog::level::warn,
                "http source {}: attempt failed in {}: {}", where_, step, what);
    if (ex->stream)
      ex->stream->close();
    fail(ex, policy::outcome_kind::transient);
  } catch (...) {
    // Nothing left to do that could not throw again; the requester's
    // own deadline answers it.
  }
}

void http_client::engine::start(uint64_t id, call_request req, done_fn done) {
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

void http_client::engine::start_here(uint64_t id, call_request req,
                                     done_fn& done) {
  auto ex = std::make_shared<exchange>();
  ex->id = id;
  ex->done = std::move(done);
  guarded(ex, "start", [this, ex, &req] { begin(ex, std::move(req)); })();
}

void http_client::engine::cancel(uint64_t id) {
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

void http_client::engine::close() {
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

// -- http_client
// ---------------------------------------------------------------

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
