#pragma once

// A small blocking HTTP/1.1 client for tests against a node on loopback:
// one-shot exchanges, raw bytes, and a reader for chunked streams that notes
// when each piece arrived. Every wait is bounded (10 s unless told).

#include <cctype>
#include <chrono>
#include <map>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace sluice::testing::loopback {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct reply {
  unsigned status = 0;
  std::string body;
  std::string retry_after;
  std::string content_type;
  /// Every response header, by lowercase name (the last one of a name).
  std::map<std::string, std::string> headers{};

  json doc() const { return json::parse(body, nullptr, false); }

  std::string header(const std::string& lowercase_name) const {
    auto i = headers.find(lowercase_name);
    return i == headers.end() ? "" : i->second;
  }
};

// Reads one response from `stream`, giving up after 10 s.
inline reply read_reply(beast::tcp_stream& stream, net::io_context& ioc) {
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  beast::error_code ec;
  stream.expires_after(10s);
  http::async_read(stream, buf, res,
                   [&](beast::error_code e, std::size_t) { ec = e; });
  ioc.restart();
  ioc.run();
  if (ec)
    return {0, "no reply: " + ec.message(), "", ""};
  reply r{res.result_int(), res.body(),
          std::string{res[http::field::retry_after]},
          std::string{res[http::field::content_type]}};
  for (auto& f : res) {
    std::string name{f.name_string()};
    for (auto& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string{f.value()};
  }
  return r;
}

using header_list = std::vector<std::pair<std::string, std::string>>;

// One HTTP/1.1 exchange on a fresh connection with extra request `headers`
// (bounded: 10 s).
inline reply exchange_with(uint16_t port, http::verb method,
                           const std::string& target, const std::string& body,
                           const header_list& headers);

// One HTTP/1.1 exchange on a fresh connection (bounded: 10 s).
inline reply exchange(uint16_t port, http::verb method,
                      const std::string& target, const std::string& body = "",
                      const std::string& session = "") {
  header_list h;
  if (!session.empty())
    h.emplace_back("X-Session-Id", session);
  return exchange_with(port, method, target, body, h);
}

inline reply exchange_with(uint16_t port, http::verb method,
                           const std::string& target, const std::string& body,
                           const header_list& headers) {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::error_code ec;
  stream.socket().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec)
    return {0, "connect failed: " + ec.message(), "", ""};
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  for (auto& [name, value] : headers)
    req.insert(name, value);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req, ec);
  if (ec)
    return {0, "write failed: " + ec.message(), "", ""};
  auto r = read_reply(stream, ioc);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return r;
}

// Sends `bytes` as they are (no HTTP framing by the client) and reads the
// node's answer.
inline reply raw_exchange(uint16_t port, const std::string& bytes) {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::error_code ec;
  stream.socket().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec)
    return {0, "connect failed: " + ec.message(), "", ""};
  net::write(stream.socket(), net::buffer(bytes), ec);
  if (ec)
    return {0, "write failed: " + ec.message(), "", ""};
  return read_reply(stream, ioc);
}

template <class Pred>
inline bool eventually(Pred pred, clk::duration limit = 10s) {
  auto deadline = clk::now() + limit;
  while (!pred() && clk::now() < deadline)
    std::this_thread::sleep_for(5ms);
  return pred();
}

// A client reading a chunked stream as it arrives (a streamed answer or
// GET /events), noting when each piece came. Every read is bounded.
struct stream_client {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  std::string all;
  std::vector<std::pair<clk::time_point, std::string>> pieces;
  bool closed = false;

  explicit stream_client(uint16_t port) {
    stream.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
  }

  void send(http::verb method, const std::string& target,
            const std::string& body = "") {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);
  }

  bool has(const std::string& text) const {
    return all.find(text) != std::string::npos;
  }

  // Reads until `marker` has arrived (true), or the peer closes or `limit`
  // passes (false).
  bool read_until(const std::string& marker, clk::duration limit = 10s) {
    auto deadline = clk::now() + limit;
    while (!has(marker)) {
      if (closed || clk::now() >= deadline)
        return false;
      char buf[4096];
      beast::error_code ec;
      size_t n = 0;
      stream.expires_at(deadline);
      stream.async_read_some(net::buffer(buf),
                             [&](beast::error_code e, size_t k) {
                               ec = e;
                               n = k;
                             });
      ioc.restart();
      ioc.run();
      if (n > 0) {
        pieces.emplace_back(clk::now(), std::string{buf, n});
        all.append(buf, n);
      }
      if (ec && ec != beast::error::timeout)
        closed = true;
    }
    return true;
  }

  // When the piece completing `text` arrived.
  clk::time_point arrival(const std::string& text) const {
    std::string so_far;
    for (auto& [at, piece] : pieces) {
      so_far += piece;
      if (so_far.find(text) != std::string::npos)
        return at;
    }
    return {};
  }

  void close() {
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.socket().close(ec);
  }
};

} // namespace sluice::testing::loopback
