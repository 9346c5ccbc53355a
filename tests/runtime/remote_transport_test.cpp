// The transport of sources in other processes (runtime/remote_source,
// remote_link, remote_wire), both sides in this process on real loopback
// sockets: only a peer with a certificate by the configured CA gets an
// attempt served (plain TCP, TLS without a client certificate and one by
// another CA are refused, and the source serves the real node after);
// a frame header announcing 1 GiB is refused without allocating it; a
// black-holed address holds no other remote source, and a connector
// connecting to it stops at once.

#include "remote_transport_shared.hpp"

using namespace remote_transport_test_support;

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
