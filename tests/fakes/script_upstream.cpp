#include "fakes/script_upstream.hpp"

#include <algorithm>
#include <cstdlib>

#include <sys/socket.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

namespace sluice::testing {

namespace net = boost::asio;
using tcp = net::ip::tcp;

script_upstream::script_upstream(answer_fn answer, uint16_t port)
    : answer_(std::move(answer))
    , acceptor_(ioc_, tcp::endpoint{net::ip::make_address("127.0.0.1"), port}) {
  accept_thread_ = std::thread{[this] {
    while (!stop_) {
      boost::system::error_code ec;
      tcp::socket s{ioc_};
      acceptor_.accept(s, ec);
      if (ec || stop_)
        return;
      std::lock_guard<std::mutex> guard{mx_};
      open_fds_.push_back(s.native_handle());
      threads_.emplace_back(
          [this, s = std::move(s)]() mutable { serve(std::move(s)); });
    }
  }};
}

script_upstream::~script_upstream() {
  stop_ = true;
  {
    // Wake the accept loop, and every connection blocked in a read.
    boost::system::error_code ec;
    tcp::socket poke{ioc_};
    poke.connect(acceptor_.local_endpoint(), ec);
  }
  accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> guard{mx_};
    for (auto fd : open_fds_)
      ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (auto& t : threads)
    t.join();
}

std::string script_upstream::url() const {
  return "http://127.0.0.1:" + std::to_string(port());
}

uint16_t script_upstream::port() const {
  return acceptor_.local_endpoint().port();
}

bool script_upstream::send(tcp::socket& s, const std::string& bytes) {
  boost::system::error_code ec;
  auto n = net::write(s, net::buffer(bytes), ec);
  bytes_written += n;
  return !ec;
}

void script_upstream::serve(tcp::socket socket) {
  std::string buf;
  for (;;) {
    // One request: the header, then Content-Length bytes of body.
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      char chunk[4096];
      boost::system::error_code ec;
      auto n = socket.read_some(net::buffer(chunk), ec);
      if (ec || stop_)
        return;
      buf.append(chunk, n);
    }
    auto header = buf.substr(0, end + 4);
    size_t length = 0;
    std::string lower = header;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (auto at = lower.find("content-length:"); at != std::string::npos)
      length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
    while (buf.size() < end + 4 + length) {
      char chunk[4096];
      boost::system::error_code ec;
      auto n = socket.read_some(net::buffer(chunk), ec);
      if (ec || stop_)
        return;
      buf.append(chunk, n);
    }
    auto request = buf.substr(0, end + 4 + length);
    buf.erase(0, end + 4 + length);
    ++requests;
    if (stop_ || !answer_(*this, socket, request))
      return;
  }
}

} // namespace sluice::testing
