#include "sluice/actors/io_thread.hpp"

#include <boost/beast/core/tcp_stream.hpp>

#include "sluice/actors/log.hpp"

namespace sluice::upstream {

io_thread::io_thread(caf::actor_system& sys, std::string where)
    : hold_(sys)
    , where_(std::move(where))
    , work_(boost::asio::make_work_guard(ioc_)) {
  // A socket and a timer build the reactor: an epoll descriptor, an
  // eventfd, a timerfd.
  { boost::beast::tcp_stream warm{ioc_}; }
}

io_thread::~io_thread() {
  stop();
}

void io_thread::start() {
  thread_ = std::thread{[this] { run(); }};
}

void io_thread::stop() noexcept {
  work_.reset();
  ioc_.stop();
  if (thread_.joinable())
    thread_.join();
}

void io_thread::run() noexcept {
  for (;;) {
    try {
      ioc_.run();
      return; // stopped
    } catch (const std::exception& e) {
      static log_limit lim;
      log_limited(lim, spdlog::level::err, "{}: I/O loop caught: {}", where_,
                  e.what());
    } catch (...) {
      static log_limit lim;
      log_limited(lim, spdlog::level::err,
                  "{}: I/O loop caught an unknown exception", where_);
    }
  }
}

} // namespace sluice::upstream
