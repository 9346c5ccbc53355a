#pragma once

// A small blocking HTTP/1.1 upstream on loopback for tests: a thread per
// connection, behaviour chosen by a keyword segment anywhere in the request
// path (so a source's base_url prefix can pick it):
//
//   ok      200 {"ok":true}             busy   429, Retry-After: 7
//   busy1   429 (Retry-After: 1) to the first request, 200 after
//   down    503                          bad    400 with a JSON error
//   auth    200, body = the Authorization header it got
//   teapot  418, text/plain "short and stout"
//   empty   200 with an empty body
//   slow    answers after 3 s (a hang; counts a client closing meanwhile)
//   stream  200 text/event-stream, 3 events 150 ms apart, then [DONE]
//   cut     200 text/event-stream, one event, then closes mid-body
//   stall   200 text/event-stream, one event, then 3 s of silence
//   burst   200 text/event-stream, 3 events, [DONE] and the end, all in
//           one write
//   limited a provider's token limit (`limited_tokens` per 1 s window, the
//           first request opening it): each request takes
//           `limited_charge` tokens; answered after 50 ms, 200 with usage
//           when they were left, else 429 (Retry-After: 1); either way
//           with OpenAI's x-ratelimit-{limit,remaining,reset}-tokens
//
// Anything else is 404. While `failing` is set every request gets 503; while
// `hanging` is set every request is `slow`.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace sluice::testing {

class test_upstream {
public:
  test_upstream();
  ~test_upstream();

  test_upstream(const test_upstream&) = delete;
  test_upstream& operator=(const test_upstream&) = delete;

  uint16_t port() const;

  /// `http://127.0.0.1:PORT` followed by `prefix`.
  std::string url(const std::string& prefix = "") const;

  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  /// Requests whose client closed the connection before the answer was done.
  std::atomic<int> closed_by_client{0};
  /// Every request answers 503 while set.
  std::atomic<bool> failing{false};
  /// Every request answers after 3 s (as `slow`) while set.
  std::atomic<bool> hanging{false};

  /// The `limited` endpoint's limit per window, its charge per request,
  /// and the 429s it answered.
  std::atomic<int> limited_tokens{1000};
  std::atomic<int> limited_charge{100};
  std::atomic<int> limited_429s{0};

  /// When each request arrived (its head read), in order.
  std::vector<std::chrono::steady_clock::time_point> arrivals() const;

private:
  void accept_loop();
  void serve(boost::asio::ip::tcp::socket socket);

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<int> busy1_seen_{0};
  std::mutex limited_mx_;
  std::chrono::steady_clock::time_point window_end_{};
  int window_left_ = 0;
  std::thread accept_thread_;
  std::mutex threads_mx_;
  mutable std::mutex arrivals_mx_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
  std::vector<std::thread> connection_threads_;
};

} // namespace sluice::testing
