#include "sluice/actors/loops/io_thread.hpp"

#include <pthread.h>
#include <signal.h>

#include <boost/beast/core/tcp_stream.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_guard.hpp"

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
  assert_not_on_loop("joining an I/O thread");
  work_.reset();
  ioc_.stop();
  if (thread_.joinable())
    thread_.join();
}

namespace {

// A report that throws (the log) must not end the loop.
void report(const std::function<void(const char*)>& caught,
            const char* what) noexcept {
  try {
    caught(what);
  } catch (...) {
    // nop
  }
}

} // namespace

void run_until_stopped(
    boost::asio::io_context& loop,
    const std::function<void(const char* what)>& caught) noexcept {
  // A write into a pipe whose reader is gone (a tool server's stdin) fails
  // with EPIPE on our loops, never raises SIGPIPE in a host process that
  // did not ignore it (the node does; a service embedding Sluice may not).
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  for (;;) {
    try {
      loop.run();
      return; // stopped
    } catch (const std::exception& e) {
      report(caught, e.what());
    } catch (...) {
      report(caught, nullptr);
    }
  }
}

void io_thread::run() noexcept {
  run_until_stopped(ioc_, [this](const char* what) {
    static log_limit lim;
    log_limited(lim, spdlog::level::err, "{}: I/O loop caught: {}", where_,
                what != nullptr ? what : "an unknown exception");
  });
}

} // namespace sluice::upstream
