#pragma once

// A scripted raw-TCP upstream for tests of what an HTTP client does with
// answers no well-behaved server sends: interim 1xx answers, stale or extra
// answers, wrong Content-Lengths, bodies without end, closes at any point.
//
// Per connection, a thread reads one request at a time (Beast, blocking)
// and asks the script what to do about it: a list of steps -- write bytes,
// pause, write many filler bytes, close -- carried out in order, after
// which the next request is read (unless a step closed the connection).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace sluice::testing {

/// A request as the raw upstream read it.
struct raw_request {
  std::string target;
  /// The Host header as sent.
  std::string host;
  std::string body;
  /// Every header field as sent, in order (name as written, value).
  std::vector<std::pair<std::string, std::string>> headers;
  /// Which connection (0, 1, ... in accept order) and which request on it.
  int connection = 0;
  int index_on_connection = 0;
};

/// One thing the upstream does in answer to a request.
struct raw_step {
  enum kind_t { write, pause, fill, fill_chunked, close };
  kind_t kind = write;
  std::string bytes;
  std::chrono::milliseconds wait{0};
  uint64_t count = 0;

  /// Writes `bytes` as they are.
  static raw_step send(std::string bytes);
  /// Waits `d`.
  static raw_step sleep(std::chrono::milliseconds d);
  /// Writes `n` filler bytes ('x'), in pieces, until one fails.
  static raw_step filler(uint64_t n);
  /// Writes `n` filler bytes as HTTP chunks (then the last chunk), until a
  /// write fails.
  static raw_step chunked_filler(uint64_t n);
  /// Closes the connection (no further request is read on it).
  static raw_step hang_up();
};

/// What to do about each request.
using raw_script = std::function<std::vector<raw_step>(const raw_request&)>;

/// `HTTP/1.1 <status_line>` with a Content-Length and `body`.
std::string raw_response(const std::string& status_line,
                         const std::string& body,
                         const std::string& extra_headers = "");

class raw_upstream {
public:
  /// Listens on `address` (e.g. "127.0.0.1", "::1"), any free port.
  explicit raw_upstream(raw_script script,
                        const std::string& address = "127.0.0.1");
  ~raw_upstream();

  raw_upstream(const raw_upstream&) = delete;
  raw_upstream& operator=(const raw_upstream&) = delete;

  uint16_t port() const;

  /// `http://ADDRESS:PORT` (brackets around an IPv6 address) + `prefix`.
  std::string url(const std::string& prefix = "") const;

  /// Waits (up to `limit`) until every request read so far has had all of
  /// its steps carried out; false if that did not happen in time.
  bool wait_idle(std::chrono::milliseconds limit = std::chrono::seconds{10});

  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  /// Requests whose steps have all been carried out (or cut short by a
  /// failed write).
  std::atomic<int> scripts_done{0};
  /// Bytes written successfully, all connections together.
  std::atomic<uint64_t> bytes_written{0};

private:
  void accept_loop();
  void serve(std::shared_ptr<boost::asio::ip::tcp::socket> socket, int index);

  raw_script script_;
  std::string address_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex mx_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> sockets_;
};

} // namespace sluice::testing
