// The remote transport's tests' shared part: TLS settings, the process's
// memory, a socket's close, the fixture with a served source.

#pragma once

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <catch2/catch.hpp>

#include "fakes/tls_upstream.hpp"
#include "loopback_http.hpp"
#include "sluice/messages/errors.hpp"
#include "sluice/runtime/remote_source.hpp"
#include "sluice/runtime/remote_wire.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using sluice::testing::test_pki;
using sluice::testing::loopback::eventually;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace remote_transport_test_support {

// A source that answers every attempt at once, counting them.
inline source_actor counting_source(caf::actor_system& sys,
                                    std::shared_ptr<std::atomic<int>> served) {
  return caf::actor_cast<source_actor>(
      sys.spawn([served](caf::event_based_actor*) -> caf::behavior {
        return {[served](attempt_atom, const call_request& req) {
          ++*served;
          source_reply r;
          r.kind = policy::outcome_kind::ok;
          r.status = 200;
          r.body = "served " + req.payload;
          return r;
        }};
      }));
}

inline remote_tls_config server_tls() {
  auto& pki = test_pki::get();
  return {pki.file("ca.pem"), pki.file("server.pem"), pki.file("server.key"),
          ""};
}

inline remote_tls_config node_tls() {
  auto& pki = test_pki::get();
  return {pki.file("ca.pem"), pki.file("client.pem"), pki.file("client.key"),
          ""};
}

// The process's resident memory in bytes.
inline size_t rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Whether the peer closes `fd`'s connection within `limit` (reads and
// discards until EOF or an error); shuts the socket down if it does not,
// so the reading thread ends either way.
inline bool closed_within(int fd, std::chrono::milliseconds limit) {
  auto done = std::async(std::launch::async, [fd] {
    char buf[4096];
    for (;;) {
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0)
        return;
    }
  });
  if (done.wait_for(limit) == std::future_status::ready)
    return true;
  ::shutdown(fd, SHUT_RDWR);
  done.wait();
  return false;
}

struct fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<std::atomic<int>> served =
      std::make_shared<std::atomic<int>>(0);
  source_actor source;
  std::unique_ptr<remote_source_server> server;

  fixture() {
    add_error_category(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    source = counting_source(*sys, served);
    server =
        std::make_unique<remote_source_server>(*sys, source, 0, server_tls());
  }

  ~fixture() {
    server.reset();
    caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
  }

  remote_source_config node_config(uint16_t port) const {
    remote_source_config c;
    c.port = port;
    c.tls = node_tls();
    c.connect_timeout = 1s;
    c.reconnect_min = 20ms;
    c.reconnect_max = 200ms;
    return c;
  }

  // One attempt through `node`; its answer's body, or the error's text.
  std::string ask(const source_actor& node, const std::string& payload) {
    caf::scoped_actor self{*sys};
    call_request req;
    req.route = "/v1/tools";
    req.payload = payload;
    std::string out;
    self->request(node, 5s, attempt_atom_v, req)
        .receive([&](source_reply& r) { out = r.body; },
                 [&](caf::error& e) { out = "error " + sys->render(e); });
    return out;
  }

  bool serves(const source_actor& node) {
    return eventually([&] { return ask(node, "x") == "served x"; }, 10s);
  }
};

inline void stop(const source_actor& a) {
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

// A TLS client with `cert`/`key` (empty: none) that handshakes with the
// server, sends an attempt frame and tells whether it was answered.
inline bool stranger_gets_answer(uint16_t port, const std::string& cert,
                                 const std::string& key) {
  net::io_context ioc;
  ssl::context ctx{ssl::context::tls_client};
  ctx.load_verify_file(test_pki::get().file("ca.pem"));
  ctx.set_verify_mode(ssl::verify_peer);
  if (!cert.empty()) {
    ctx.use_certificate_chain_file(cert);
    ctx.use_private_key_file(key, ssl::context::pem);
  }
  ssl::stream<tcp::socket> s{ioc, ctx};
  s.next_layer().connect({net::ip::make_address("127.0.0.1"), port});
  boost::system::error_code ec;
  s.handshake(ssl::stream_base::client, ec);
  if (ec)
    return false; // refused at the handshake (TLS 1.2)
  call_request req;
  req.route = "/v1/tools";
  req.payload = "from a stranger";
  auto frame = remote_wire::encode_attempt(7, req);
  net::write(s, net::buffer(frame), ec);
  if (ec)
    return false;
  // TLS 1.3: the server checks the certificate after the client's
  // handshake is done, and answers with an alert and a close.
  char header[remote_wire::header_bytes];
  std::thread watchdog;
  auto fd = s.next_layer().native_handle();
  std::atomic<bool> finished{false};
  watchdog = std::thread{[&] {
    for (int i = 0; i < 50 && !finished; ++i)
      std::this_thread::sleep_for(100ms);
    if (!finished)
      ::shutdown(fd, SHUT_RDWR);
  }};
  net::read(s, net::buffer(header), ec);
  finished = true;
  watchdog.join();
  return !ec;
}

} // namespace remote_transport_test_support
