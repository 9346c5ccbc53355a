#include "fakes/raw_upstream.hpp"

#include <algorithm>
#include <sstream>

#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sluice::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

/// Filler bytes per write.
constexpr std::size_t filler_piece_bytes = 64 * 1024;

} // namespace

raw_step raw_step::send(std::string bytes) {
  raw_step s;
  s.kind = write;
  s.bytes = std::move(bytes);
  return s;
}

raw_step raw_step::sleep(std::chrono::milliseconds d) {
  raw_step s;
  s.kind = pause;
  s.wait = d;
  return s;
}

raw_step raw_step::filler(uint64_t n) {
  raw_step s;
  s.kind = fill;
  s.count = n;
  return s;
}

raw_step raw_step::chunked_filler(uint64_t n) {
  raw_step s;
  s.kind = fill_chunked;
  s.count = n;
  return s;
}

raw_step raw_step::hang_up() {
  raw_step s;
  s.kind = close;
  return s;
}

std::string raw_response(const std::string& status_line,
                         const std::string& body,
                         const std::string& extra_headers) {
  return "HTTP/1.1 " + status_line +
         "\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

raw_upstream::raw_upstream(raw_script script, const std::string& address)
    : script_(std::move(script))
    , address_(address)
    , acceptor_(ioc_, {net::ip::make_address(address), 0}) {
  accept_thread_ = std::thread{[this] { accept_loop(); }};
}

raw_upstream::~raw_upstream() {
  stop_ = true;
  // Unblock accept() with one last connection, and every read or write
  // with a shutdown of its socket.
  beast::error_code ec;
  net::io_context ioc;
  tcp::socket s{ioc};
  s.connect({net::ip::make_address(address_), port()}, ec);
  accept_thread_.join();
  std::lock_guard<std::mutex> guard{mx_};
  for (auto& sock : sockets_)
    sock->shutdown(tcp::socket::shutdown_both, ec);
  for (auto& t : threads_)
    t.join();
}

uint16_t raw_upstream::port() const {
  return acceptor_.local_endpoint().port();
}

std::string raw_upstream::url(const std::string& prefix) const {
  auto host =
      address_.find(':') == std::string::npos ? address_ : "[" + address_ + "]";
  return "http://" + host + ":" + std::to_string(port()) + prefix;
}

bool raw_upstream::wait_idle(std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (scripts_done.load() < requests.load())
    if (std::chrono::steady_clock::now() > end)
      return false;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
  // The last bytes written are in the client's receive queue by now on
  // loopback; a moment more for the kernel's bookkeeping.
  std::this_thread::sleep_for(std::chrono::milliseconds{5});
  return true;
}

void raw_upstream::accept_loop() {
  for (int index = 0; !stop_; ++index) {
    beast::error_code ec;
    auto socket = std::make_shared<tcp::socket>(ioc_);
    acceptor_.accept(*socket, ec);
    if (ec || stop_)
      return;
    ++connections;
    std::lock_guard<std::mutex> guard{mx_};
    sockets_.push_back(socket);
    threads_.emplace_back([this, socket, index] { serve(socket, index); });
  }
}

void raw_upstream::serve(std::shared_ptr<tcp::socket> socket, int index) {
  beast::flat_buffer buf;
  for (int n = 0;; ++n) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(*socket, buf, req, ec);
    if (ec || stop_)
      return;
    raw_request r;
    r.target = std::string{req.target()};
    if (auto h = req.find(http::field::host); h != req.end())
      r.host = std::string{h->value()};
    r.body = req.body();
    for (auto& f : req)
      r.headers.emplace_back(std::string{f.name_string()},
                             std::string{f.value()});
    r.connection = index;
    r.index_on_connection = n;
    auto steps = script_(r);
    ++requests;
    bool closed = false;
    auto put = [&](const std::string& bytes) {
      net::write(*socket, net::buffer(bytes), ec);
      if (!ec)
        bytes_written += bytes.size();
      return !ec;
    };
    for (auto& step : steps) {
      switch (step.kind) {
      case raw_step::write:
        put(step.bytes);
        break;
      case raw_step::pause:
        std::this_thread::sleep_for(step.wait);
        break;
      case raw_step::fill: {
        std::string piece(filler_piece_bytes, 'x');
        for (uint64_t left = step.count; left > 0 && !ec;) {
          auto k = std::min<uint64_t>(left, piece.size());
          if (!put(piece.substr(0, k)))
            break;
          left -= k;
        }
        break;
      }
      case raw_step::fill_chunked: {
        std::string piece(filler_piece_bytes, 'x');
        std::ostringstream head;
        head << std::hex << piece.size() << "\r\n";
        auto chunk = head.str() + piece + "\r\n";
        for (uint64_t left = step.count; left > 0 && !ec;) {
          if (!put(chunk))
            break;
          left -= std::min<uint64_t>(left, piece.size());
        }
        if (!ec)
          put("0\r\n\r\n");
        break;
      }
      case raw_step::close:
        socket->shutdown(tcp::socket::shutdown_both, ec);
        closed = true;
        break;
      }
      if (ec || closed)
        break;
    }
    ++scripts_done;
    if (ec || closed)
      return;
  }
}

} // namespace sluice::testing
