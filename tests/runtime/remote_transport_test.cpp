// The transport of sources in other processes (runtime/remote_source,
// remote_link, remote_wire), both sides in this process on real loopback
// sockets: only a peer with a certificate by the configured CA gets an
// attempt served (plain TCP, TLS without a client certificate and one by
// another CA are refused, and the source serves the real node after);
// a frame header announcing 1 GiB is refused without allocating it; a
// black-holed address holds no other remote source, and a connector
// connecting to it stops at once.

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

namespace {

// A source that answers every attempt at once, counting them.
source_actor counting_source(caf::actor_system& sys,
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

remote_tls_config server_tls() {
  auto& pki = test_pki::get();
  return {pki.file("ca.pem"), pki.file("server.pem"), pki.file("server.key"),
          ""};
}

remote_tls_config node_tls() {
  auto& pki = test_pki::get();
  return {pki.file("ca.pem"), pki.file("client.pem"), pki.file("client.key"),
          ""};
}

// The process's resident memory in bytes.
size_t rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Whether the peer closes `fd`'s connection within `limit` (reads and
// discards until EOF or an error); shuts the socket down if it does not,
// so the reading thread ends either way.
bool closed_within(int fd, std::chrono::milliseconds limit) {
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

void stop(const source_actor& a) {
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

// A TLS client with `cert`/`key` (empty: none) that handshakes with the
// server, sends an attempt frame and tells whether it was answered.
bool stranger_gets_answer(uint16_t port, const std::string& cert,
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

} // namespace

TEST_CASE_METHOD(
    fixture,
    "remote: only a peer with a certificate by the configured CA "
    "gets an attempt served, and strangers do not affect the source",
    "[remote]") {
  auto node = spawn_remote_source(*sys, node_config(server->port()));
  REQUIRE(serves(node));
  auto before = served->load();
  auto attempts = server->stats().attempts.load();
  auto& pki = test_pki::get();
  SECTION("plain TCP, a CAF BASP-like header first") {
    tcp::socket raw{*std::make_unique<net::io_context>()};
    net::io_context ioc;
    tcp::socket s{ioc};
    s.connect({net::ip::make_address("127.0.0.1"), server->port()});
    call_request req;
    req.payload = "plain";
    auto frame = remote_wire::encode_attempt(1, req);
    net::write(s, net::buffer(frame));
    CHECK(closed_within(s.native_handle(), 5s));
  }
  SECTION("TLS without a client certificate") {
    CHECK_FALSE(stranger_gets_answer(server->port(), "", ""));
  }
  SECTION("a client certificate by another CA") {
    CHECK_FALSE(stranger_gets_answer(server->port(), pki.file("stranger.pem"),
                                     pki.file("stranger.key")));
  }
  CHECK(eventually([&] { return server->stats().refused.load() >= 1; }, 5s));
  CHECK(server->stats().attempts.load() == attempts);
  CHECK(served->load() == before);
  // The source and its server are untouched: the node is served still.
  CHECK(ask(node, "after") == "served after");
  stop(node);
}

TEST_CASE("remote: a frame header announcing 1 GiB is refused before any "
          "allocation",
          "[remote]") {
  SECTION("the decoder") {
    remote_wire::frame_decoder d;
    std::string header;
    for (uint32_t v : {0x40u, 0u, 0u, 0u}) // 1 GiB, big-endian
      header.push_back(static_cast<char>(v));
    header.push_back(static_cast<char>(remote_wire::frame_kind::reply));
    header.append(8, '\0');
    int frames = 0;
    auto why = d.feed(header.data(), header.size(),
                      [&](remote_wire::frame&&) { ++frames; });
    REQUIRE(why != nullptr);
    CHECK(std::string{why}.find("max_remote_frame_bytes") != std::string::npos);
    CHECK(frames == 0);
    // The header, and an empty string's inline buffer: no allocation.
    CHECK(d.held() <= remote_wire::header_bytes + sizeof(std::string));
    // Nothing more is taken after a refusal.
    CHECK(d.feed("x", 1, [&](remote_wire::frame&&) { ++frames; }) == why);
  }
  SECTION("the served side, from an authenticated peer and from anyone") {
    fixture f;
    auto rss0 = rss_bytes();
    // Anyone: CAF's 32-byte BASP header announcing 1 GiB (the red team's
    // attack), then our own frame header, on plain TCP.
    {
      net::io_context ioc;
      tcp::socket s{ioc};
      s.connect({net::ip::make_address("127.0.0.1"), f.server->port()});
      std::string basp(32, '\0');
      basp[4] = 0x40; // a payload length of 1 GiB
      net::write(s, net::buffer(basp));
      CHECK(closed_within(s.native_handle(), 5s));
    }
    // An authenticated peer (the node's certificate).
    {
      net::io_context ioc;
      auto& pki = test_pki::get();
      ssl::context ctx{ssl::context::tls_client};
      ctx.load_verify_file(pki.file("ca.pem"));
      ctx.set_verify_mode(ssl::verify_peer);
      ctx.use_certificate_chain_file(pki.file("client.pem"));
      ctx.use_private_key_file(pki.file("client.key"), ssl::context::pem);
      ssl::stream<tcp::socket> s{ioc, ctx};
      s.next_layer().connect(
          {net::ip::make_address("127.0.0.1"), f.server->port()});
      s.handshake(ssl::stream_base::client);
      std::string header;
      for (char c : {'\x40', '\0', '\0', '\0'})
        header.push_back(c);
      header.push_back(static_cast<char>(remote_wire::frame_kind::attempt));
      header.append(8, '\0');
      header.append(4096, 'x'); // the start of the "payload"
      net::write(s, net::buffer(header));
      CHECK(closed_within(s.next_layer().native_handle(), 5s));
    }
    CHECK(eventually([&] { return f.server->stats().bad_frames.load() == 1; },
                     5s));
    auto grown = rss_bytes() > rss0 ? rss_bytes() - rss0 : 0;
    INFO("resident memory grew by " << grown / 1024 << " KiB");
    CHECK(grown < size_t{16} << 20);
    // Still serving.
    auto node = spawn_remote_source(*f.sys, f.node_config(f.server->port()));
    CHECK(f.serves(node));
    stop(node);
  }
}

TEST_CASE_METHOD(fixture,
                 "remote: a black-holed address holds no other remote source, "
                 "and its connector stops at once",
                 "[remote]") {
  // A listener whose accept queue is full and never accepted: the kernel
  // drops further SYNs, so a connect to it hangs (offline, unlike a
  // non-routable address behind this machine's proxy).
  net::io_context ioc;
  tcp::acceptor hole{ioc};
  hole.open(tcp::v4());
  hole.bind({net::ip::make_address("127.0.0.1"), 0});
  hole.listen(0);
  auto hole_port = hole.local_endpoint().port();
  // Non-blocking connects fill the queue (Asio's connect would wait).
  std::vector<int> fill;
  for (int i = 0; i < 4; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(hole_port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    fill.push_back(fd);
  }
  auto held = std::make_shared<remote_link_health>();
  auto black = node_config(hole_port);
  black.connect_timeout = 1s;
  auto stuck = spawn_remote_source(*sys, black, held);
  auto live = spawn_remote_source(*sys, node_config(server->port()));
  auto t0 = std::chrono::steady_clock::now();
  CHECK(serves(live));
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(ask(stuck, "x").find("not connected") != std::string::npos);
  // Its connect times out (it is never refused).
  CHECK(eventually(
      [&] {
        return held->problem().value_or("").find("timed out") !=
               std::string::npos;
      },
      5s));
  INFO("the black-holed link: " << held->problem().value_or("connected"));
  // Stopping while a connect is in progress costs nothing: the connector
  // (and its loop thread) ends at once.
  caf::scoped_actor self{*sys};
  self->monitor(stuck);
  auto t1 = std::chrono::steady_clock::now();
  stop(stuck);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; },
                caf::after(std::chrono::seconds{3}) >> [] {});
  CHECK(down);
  CHECK(std::chrono::steady_clock::now() - t1 < 500ms);
  CHECK(ask(live, "y") == "served y");
  stop(live);
  for (int fd : fill)
    ::close(fd);
}

TEST_CASE_METHOD(fixture,
                 "remote: a node without the server's CA, or expecting "
                 "another name, never connects",
                 "[remote]") {
  auto& pki = test_pki::get();
  auto health = std::make_shared<remote_link_health>();
  auto c = node_config(server->port());
  c.tls.ca_file = pki.file("other_ca.pem");
  auto node = spawn_remote_source(*sys, c, health);
  CHECK(eventually(
      [&] {
        return health->problem().value_or("").find("TLS handshake") !=
               std::string::npos;
      },
      5s));
  CHECK(ask(node, "x").find("not connected") != std::string::npos);
  stop(node);
  auto named = node_config(server->port());
  named.tls.server_name = "elsewhere.example";
  auto health2 = std::make_shared<remote_link_health>();
  auto node2 = spawn_remote_source(*sys, named, health2);
  CHECK(eventually(
      [&] {
        return health2->problem().value_or("").find("TLS handshake") !=
               std::string::npos;
      },
      5s));
  stop(node2);
  CHECK(served->load() == 0);
}

TEST_CASE_METHOD(fixture,
                 "remote: a served side that goes is reported in the link's "
                 "health, and healthy again once it is back",
                 "[remote]") {
  auto health = std::make_shared<remote_link_health>();
  auto port = server->port();
  auto node = spawn_remote_source(*sys, node_config(port), health);
  REQUIRE(serves(node));
  CHECK_FALSE(health->problem());
  server.reset();
  CHECK(eventually([&] { return health->problem().has_value(); }, 5s));
  INFO("why: " << health->problem().value_or(""));
  CHECK(ask(node, "x").find("not connected") != std::string::npos);
  server =
      std::make_unique<remote_source_server>(*sys, source, port, server_tls());
  CHECK(serves(node));
  CHECK_FALSE(health->problem());
  stop(node);
}

TEST_CASE("remote: certificate files that are missing or unusable are "
          "refused naming their field",
          "[remote]") {
  remote_source_config c;
  c.port = 7300;
  c.tls = node_tls();
  CHECK_NOTHROW(validate(c));
  auto refused = [](remote_source_config c) -> std::string {
    try {
      validate(c);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return {};
  };
  auto& pki = test_pki::get();
  auto bad = c;
  bad.tls.ca_file.clear();
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.ca_file"));
  bad = c;
  bad.tls.cert_file = pki.file("not_a_cert.pem");
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.cert_file"));
  bad = c;
  bad.tls.key_file = pki.file("server.key"); // not client.pem's key
  CHECK_THAT(refused(bad), Catch::StartsWith("tls.key_file"));
}

TEST_CASE("remote: a streamed answer crosses in pieces of at most 1 MiB, "
          "and a body past 64 MiB fails its own attempt only",
          "[remote]") {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  // Streams one 3 MiB chunk for a streamed call; answers a 65 MiB body to
  // "huge", a short one otherwise.
  auto source = caf::actor_cast<source_actor>(
      sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
        return {[self](attempt_atom, const call_request& req) {
          source_reply r;
          r.kind = policy::outcome_kind::ok;
          r.status = 200;
          if (req.stream_to) {
            self->send(req.stream_to, stream_chunk_atom_v, req.stream_tag,
                       std::string(3 << 20, 's'));
          } else if (req.payload == "huge") {
            r.body.assign((size_t{65} << 20), 'h');
          } else {
            r.body = "small";
          }
          return r;
        }};
      }));
  auto server =
      std::make_unique<remote_source_server>(sys, source, 0, server_tls());
  remote_source_config c;
  c.port = server->port();
  c.tls = node_tls();
  auto node = spawn_remote_source(sys, c);
  auto pieces = std::make_shared<std::atomic<int>>(0);
  auto bytes = std::make_shared<std::atomic<size_t>>(0);
  auto largest = std::make_shared<std::atomic<size_t>>(0);
  auto collector = sys.spawn([=](caf::event_based_actor*) -> caf::behavior {
    return {[=](stream_chunk_atom, uint64_t, const std::string& b) {
      ++*pieces;
      *bytes += b.size();
      if (b.size() > largest->load())
        largest->store(b.size());
    }};
  });
  caf::scoped_actor self{sys};
  auto ask = [&](call_request req) {
    source_reply out;
    out.kind = policy::outcome_kind::permanent;
    self->request(node, 10s, attempt_atom_v, std::move(req))
        .receive([&](source_reply& r) { out = std::move(r); },
                 [&](caf::error&) {});
    return out;
  };
  call_request plain;
  plain.payload = "x";
  REQUIRE(eventually([&] { return ask(plain).body == "small"; }, 10s));
  call_request streamed;
  streamed.stream = true;
  streamed.stream_to = collector;
  streamed.stream_tag = 42;
  auto r = ask(streamed);
  CHECK(r.kind == policy::outcome_kind::ok);
  CHECK(eventually([&] { return bytes->load() == size_t{3} << 20; }, 5s));
  CHECK(pieces->load() == 3);
  CHECK(largest->load() == size_t{1} << 20);
  call_request huge;
  huge.payload = "huge";
  auto h = ask(huge);
  CHECK(h.kind == policy::outcome_kind::transient);
  CHECK(h.body.find("past 64 MiB") != std::string::npos);
  // The link held: the next attempt on it is served.
  CHECK(ask(plain).body == "small");
  caf::anon_send_exit(node, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(collector, caf::exit_reason::user_shutdown);
  server.reset();
  caf::anon_send_exit(source, caf::exit_reason::user_shutdown);
}
