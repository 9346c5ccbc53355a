#include "sluice/actors/mcp/http_channel.hpp"

#include <stdexcept>

#include "sluice/actors/mcp/http_channel_exchange.hpp"

namespace sluice::mcp {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using policy::outcome_kind;
using policy::mcp::delivery;
using namespace http_detail;

std::shared_ptr<http_channel> http_channel::make(net::io_context& loop,
                                                 const mcp_server_settings& cfg,
                                                 handlers h) {
  return std::make_shared<http_channel>(loop, cfg, std::move(h));
}

http_channel::http_channel(net::io_context& loop,
                           const mcp_server_settings& cfg, handlers h)
    : channel(std::move(h))
    , ioc_(loop)
    , name_(cfg.name)
    , connect_timeout_(cfg.connect_timeout)
    , max_message_(cfg.max_message_bytes)
    , resolver_(loop)
    , stream_timer_(loop) {
  std::string why;
  auto url = upstream::parse_url(cfg.url, why);
  if (!url)
    throw std::invalid_argument("url: " + why);
  url_ = *url;
  host_header_ = url_.host.find(':') != std::string::npos
                     ? "[" + url_.host + "]"
                     : url_.host;
  if (url_.port != (url_.https ? "443" : "80"))
    host_header_ += ":" + url_.port;
  target_ = url_.prefix.empty() ? "/" : url_.prefix;
  if (url_.https) {
    auto tls = cfg.tls.value_or(http_tls_config{});
    tls_ = upstream::make_tls_context(tls);
    peer_name_ = tls.server_name.empty() ? url_.host : tls.server_name;
    verify_ = tls.verify;
  } else if (cfg.tls) {
    throw std::invalid_argument("tls: set for an http:// url");
  }
  headers_ = cfg.headers;
}

http_channel::~http_channel() {
  for (auto& [id, ex] : active_) {
    ex->live = false;
    if (ex->conn)
      ex->conn->close();
  }
}

// -- what the source asks
// -------------------------------------------------------

void http_channel::send(uint64_t id, std::string text, send_done done,
                        duration timeout) {
  if (stopping_) {
    if (done) {
      send_outcome out;
      out.ok = false;
      out.delivery = delivery::not_sent;
      out.reason = "not sent: the channel stopped";
      done(std::move(out));
    }
    return;
  }
  bool quiet = !done;
  if (quiet && quiet_ >= max_quiet_exchanges) {
    log_limited(http_log_limit(), spdlog::level::warn,
                "mcp server {}: {} of the gateway's messages in flight "
                "already: one dropped",
                name_, max_quiet_exchanges);
    return;
  }
  auto ex = open(id, post_message, std::move(text), std::move(done), timeout);
  if (quiet && ex->live) {
    ex->quiet = true;
    ++quiet_;
  }
}

void http_channel::cancel(uint64_t id) {
  auto i = active_.find(id);
  if (i == active_.end())
    return;
  auto ex = i->second;
  ex->done = nullptr;
  close(ex);
}

void http_channel::negotiated(const std::string& version) {
  version_ = version;
}

void http_channel::listen() {
  listening_ = true;
  if (no_stream_ || stopping_ || stream_id_ != 0)
    return;
  stream_id_ =
      open(next_own_id_++, get_stream, {}, nullptr, duration::zero())->id;
}

void http_channel::relisten() {
  stream_id_ = 0;
  if (!listening_ || no_stream_ || stopping_)
    return;
  stream_timer_.expires_after(stream_backoff_);
  stream_backoff_ = std::min(stream_backoff_ * 2, max_stream_backoff);
  stream_timer_.async_wait(
      [self = shared_from_this()](boost::system::error_code ec) {
        if (!ec)
          self->listen();
      });
}

void http_channel::stop(std::chrono::milliseconds grace) {
  if (stopping_)
    return;
  close_all();
  if (session_.empty())
    return end("stopped");
  // MCP: a client that leaves ends its session with a DELETE.
  open(
      next_own_id_++, delete_session, {},
      [self = shared_from_this()](send_outcome) {
        self->end("stopped (session deleted)");
      },
      grace);
}

void http_channel::session_lost(std::string how) {
  session_.clear(); // the source logs `how` when it hears of it
  close_all();
  end(std::move(how));
}

void http_channel::close_all() {
  stopping_ = true;
  stream_timer_.cancel();
  auto all = active_;
  for (auto& [id, ex] : all) {
    ex->done = nullptr; // the source fails what it still waits for
    close(ex);
  }
  idle_.clear();
}

} // namespace sluice::mcp
