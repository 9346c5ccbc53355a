#include "test_upstream.hpp"

#include <chrono>
#include <sstream>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sluice::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

namespace {

std::string keyword(const std::string& target) {
  static const char* known[] = {"ok",    "busy1",  "busy",  "down",
                                "bad",   "auth",   "slow",  "cut",
                                "stall", "stream", "teapot", "empty", "burst",
                                "limited"};
  std::istringstream in{target.substr(0, target.find('?'))};
  std::string seg;
  while (std::getline(in, seg, '/'))
    for (auto k : known)
      if (seg == k)
        return seg;
  return "";
}

// Waits `d`, or less if the client closes its end (returns false then).
bool wait_unless_closed(tcp::socket& socket, std::chrono::milliseconds d,
                        const std::atomic<bool>& stop) {
  auto end = std::chrono::steady_clock::now() + d;
  socket.non_blocking(true);
  while (std::chrono::steady_clock::now() < end && !stop) {
    char byte;
    beast::error_code ec;
    socket.read_some(net::buffer(&byte, 1), ec);
    if (ec && ec != net::error::would_block) {
      socket.non_blocking(false);
      return false; // eof or reset: the client is gone
    }
    std::this_thread::sleep_for(5ms);
  }
  socket.non_blocking(false);
  return true;
}

std::string sse_event(int i) {
  return "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{"
         "\"index\":0,\"delta\":{\"content\":\"part " +
         std::to_string(i) + "\"}}]}\n\n";
}

void write_chunk(tcp::socket& socket, const std::string& data,
                 beast::error_code& ec) {
  std::ostringstream out;
  out << std::hex << data.size() << "\r\n" << data << "\r\n";
  net::write(socket, net::buffer(out.str()), ec);
}

} // namespace

test_upstream::test_upstream()
    : acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
  accept_thread_ = std::thread{[this] { accept_loop(); }};
}

test_upstream::~test_upstream() {
  stop_ = true;
  // Unblock accept() with one last connection.
  beast::error_code ec;
  net::io_context ioc;
  tcp::socket s{ioc};
  s.connect({net::ip::make_address("127.0.0.1"), port()}, ec);
  accept_thread_.join();
  std::lock_guard<std::mutex> guard{threads_mx_};
  for (auto& t : connection_threads_)
    t.join();
}

uint16_t test_upstream::port() const {
  return acceptor_.local_endpoint().port();
}

std::string test_upstream::url(const std::string& prefix) const {
  return "http://127.0.0.1:" + std::to_string(port()) + prefix;
}

void test_upstream::accept_loop() {
  while (!stop_) {
    beast::error_code ec;
    tcp::socket socket{ioc_};
    acceptor_.accept(socket, ec);
    if (ec || stop_)
      return;
    ++connections;
    std::lock_guard<std::mutex> guard{threads_mx_};
    connection_threads_.emplace_back(
        [this, s = std::move(socket)]() mutable { serve(std::move(s)); });
  }
}

std::vector<std::chrono::steady_clock::time_point>
test_upstream::arrivals() const {
  std::lock_guard<std::mutex> guard{arrivals_mx_};
  return arrivals_;
}

void test_upstream::serve(tcp::socket socket) {
  beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(socket, buf, req, ec);
    if (ec)
      return;
    ++requests;
    {
      std::lock_guard<std::mutex> guard{arrivals_mx_};
      arrivals_.push_back(std::chrono::steady_clock::now());
    }
    http::response<http::string_body> res{http::status::ok, 11};
    res.keep_alive(req.keep_alive());
    res.set(http::field::content_type, "application/json");
    auto what = failing   ? std::string{"down"}
                : hanging ? std::string{"slow"}
                          : keyword(std::string{req.target()});
    if (what == "ok") {
      res.body() = R"({"ok":true})";
    } else if (what == "busy") {
      res.result(429);
      res.set(http::field::retry_after, "7");
    } else if (what == "busy1") {
      if (busy1_seen_++ == 0) {
        res.result(429);
        res.set(http::field::retry_after, "1");
      } else {
        res.body() = R"({"ok":true,"after":"429"})";
      }
    } else if (what == "limited") {
      int left = 0;
      bool taken = false;
      std::chrono::milliseconds reset{0};
      {
        std::lock_guard<std::mutex> guard{limited_mx_};
        auto now = std::chrono::steady_clock::now();
        if (now >= window_end_) {
          window_end_ = now + 1000ms;
          window_left_ = limited_tokens;
        }
        if (window_left_ >= limited_charge) {
          window_left_ -= limited_charge;
          taken = true;
        }
        left = window_left_;
        reset = std::chrono::duration_cast<std::chrono::milliseconds>(
                    window_end_ - now) +
                1ms;
      }
      std::this_thread::sleep_for(50ms);
      res.set("x-ratelimit-limit-tokens", std::to_string(limited_tokens));
      res.set("x-ratelimit-remaining-tokens", std::to_string(left));
      res.set("x-ratelimit-reset-tokens", std::to_string(reset.count()) + "ms");
      if (taken) {
        res.body() = R"({"ok":true,"usage":{"prompt_tokens":10,)"
                     R"("completion_tokens":90,"total_tokens":100}})";
      } else {
        ++limited_429s;
        res.result(429);
        res.set(http::field::retry_after, "1");
        res.body() = R"({"error":{"message":"Rate limit reached for tokens",)"
                     R"("type":"tokens","code":"rate_limit_exceeded"}})";
      }
    } else if (what == "down") {
      res.result(503);
      res.body() = R"({"error":"down"})";
    } else if (what == "bad") {
      res.result(400);
      res.body() = R"({"error":"bad request"})";
    } else if (what == "teapot") {
      res.result(418);
      res.set(http::field::content_type, "text/plain");
      res.body() = "short and stout";
    } else if (what == "empty") {
      // 200 with no body at all.
    } else if (what == "auth") {
      res.body() = std::string{req[http::field::authorization]};
    } else if (what == "slow") {
      if (!wait_unless_closed(socket, 3000ms, stop_)) {
        ++closed_by_client;
        return;
      }
    } else if (what == "burst") {
      // A whole stream in one write: the header, three events, [DONE] and
      // the end (one read for the node).
      auto chunk = [](const std::string& data) {
        std::ostringstream out;
        out << std::hex << data.size() << "\r\n" << data << "\r\n";
        return out.str();
      };
      std::string all =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Transfer-Encoding: chunked\r\n\r\n";
      for (int i = 0; i < 3; ++i)
        all += chunk(sse_event(i));
      all += chunk("data: [DONE]\n\n") + "0\r\n\r\n";
      net::write(socket, net::buffer(all), ec);
      if (ec || !req.keep_alive())
        return;
      continue;
    } else if (what == "stream" || what == "cut" || what == "stall") {
      // Chunked server-sent events, written as they are "generated".
      std::string head =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
          "Transfer-Encoding: chunked\r\n\r\n";
      net::write(socket, net::buffer(head), ec);
      int events = what == "stream" ? 3 : 1;
      for (int i = 0; i < events && !ec; ++i) {
        if (i > 0 && !wait_unless_closed(socket, 150ms, stop_)) {
          ++closed_by_client;
          return;
        }
        write_chunk(socket, sse_event(i), ec);
      }
      if (what == "cut" || ec)
        return; // closes mid-body
      if (what == "stall") {
        if (!wait_unless_closed(socket, 3000ms, stop_))
          ++closed_by_client;
        return;
      }
      write_chunk(socket, "data: [DONE]\n\n", ec);
      net::write(socket, net::buffer(std::string{"0\r\n\r\n"}), ec);
      if (ec || !req.keep_alive())
        return;
      continue;
    } else {
      res.result(404);
    }
    res.prepare_payload();
    http::write(socket, res, ec);
    if (ec || !req.keep_alive())
      return;
  }
}

} // namespace sluice::testing
