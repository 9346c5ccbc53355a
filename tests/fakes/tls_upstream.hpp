#pragma once

// A small blocking HTTPS/1.1 upstream on loopback for tests of the HTTP
// source over TLS (Asio SSL on OpenSSL, a thread per connection), and the
// certificates it and its clients use, made by the `openssl` command.
//
// Behaviour by a keyword segment of the request path, as test_upstream:
//
//   ok      200 {"ok":true} (keep-alive)
//   stream  200 text/event-stream, chunked: 3 events 100 ms apart, [DONE]
//   endless 200 text/event-stream, chunked: an event every 20 ms until a
//           write fails (counts the client closing)
//   slow    waits for the client to close (counts it); no answer
//
// Anything else is 404.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

namespace sluice::testing {

/// Certificates made once per test process in a temporary folder (removed
/// at exit), all EC P-256:
///   ca.pem                  the test CA (trusted through `tls.ca_file`)
///   server.{pem,key}        localhost / 127.0.0.1, by the CA, valid now
///   expired.{pem,key}       localhost / 127.0.0.1, by the CA, valid in
///                           January 2020 only (`openssl ca -startdate`)
///   stranger.{pem,key}      localhost / 127.0.0.1, by another CA
///   client.{pem,key}        a client certificate by the CA
///   not_a_cert.pem          text that is no PEM
class test_pki {
public:
  /// The process's certificates (made at the first call; throws
  /// `std::runtime_error` if `openssl` fails).
  static const test_pki& get();

  /// The path of `name` in the folder.
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  ~test_pki();

private:
  test_pki();
  std::string dir_;
};

struct tls_upstream_options {
  /// The server's certificate (chain) and key (PEM files).
  std::string cert_file;
  std::string key_file;
  /// Set: a client certificate by this CA is required.
  std::string client_ca_file;
  /// Accept TCP connections but never answer the TLS handshake.
  bool silent = false;
};

class tls_upstream {
public:
  explicit tls_upstream(tls_upstream_options options);
  ~tls_upstream();

  tls_upstream(const tls_upstream&) = delete;
  tls_upstream& operator=(const tls_upstream&) = delete;

  uint16_t port() const;

  /// `https://HOST:PORT` followed by `prefix`.
  std::string url(const std::string& prefix = "",
                  const std::string& host = "127.0.0.1") const;

  /// The SNI name of the last completed handshake ("" if none was sent).
  std::string last_server_name() const;

  std::atomic<int> connections{0};
  std::atomic<int> handshakes{0};
  std::atomic<int> handshake_failures{0};
  std::atomic<int> requests{0};
  /// Requests whose client closed the connection before the answer was done.
  std::atomic<int> closed_by_client{0};

private:
  void accept_loop();
  void serve(std::shared_ptr<boost::asio::ip::tcp::socket> socket);

  tls_upstream_options options_;
  boost::asio::io_context ioc_;
  boost::asio::ssl::context ctx_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  mutable std::mutex mx_;
  std::string last_server_name_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<boost::asio::ip::tcp::socket>> sockets_;
};

} // namespace sluice::testing
