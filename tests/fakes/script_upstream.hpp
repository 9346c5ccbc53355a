#pragma once

// A scripted HTTP/1.1 upstream on loopback for hostile-traffic tests of the
// node: a thread per connection reads each request (header and
// Content-Length body) and hands it, with the socket, to `answer`, which
// writes whatever bytes it likes (well-formed or not). Keep-alive: the next
// request is read after `answer` returns, until the peer closes or
// `answer` returns false.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace sluice::testing {

class script_upstream {
public:
  /// Writes the answer to `request` (its raw header and body) on `socket`
  /// (e.g. with `send`); returns whether to keep the connection for another
  /// request.
  using answer_fn = std::function<bool(
      script_upstream&, boost::asio::ip::tcp::socket&, const std::string&)>;

  /// Listens on 127.0.0.1:`port` (0: a free one; else e.g. the port of
  /// one that stopped, to play a server started again).
  explicit script_upstream(answer_fn answer, uint16_t port = 0);
  ~script_upstream();

  script_upstream(const script_upstream&) = delete;
  script_upstream& operator=(const script_upstream&) = delete;

  /// `http://127.0.0.1:PORT`.
  std::string url() const;
  uint16_t port() const;

  std::atomic<int> requests{0};
  /// Bytes `answer` wrote in all (the writes that went through).
  std::atomic<uint64_t> bytes_written{0};

  /// Writes `bytes`; false once the peer is gone. Counts `bytes_written`.
  bool send(boost::asio::ip::tcp::socket& s, const std::string& bytes);

private:
  void serve(boost::asio::ip::tcp::socket socket);

  answer_fn answer_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex mx_;
  std::vector<std::thread> threads_;
  std::vector<int> open_fds_;
};

} // namespace sluice::testing
