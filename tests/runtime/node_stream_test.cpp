// Streams at wire speed (SPEC §11, issue 31), over real sockets on
// loopback with the node in the test process: every TCP connection of a
// call has TCP_NODELAY (read back with getsockopt on the node's own
// sockets), and pieces that belong together leave in one write (counted
// as the data segments the kernel sent on the node's client socket).

#include <string>

#include <catch2/catch.hpp>

#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "socket_probe.hpp"
#include "test_upstream.hpp"

using namespace sluice;
using sluice::testing::node_under_test;
using sluice::testing::tcp_socket_facts;
using sluice::testing::tcp_sockets;
using sluice::testing::test_upstream;
using namespace sluice::testing::loopback;

namespace {

std::string node_config(const test_upstream& up, const std::string& path) {
  // One loop: the call's actor, its upstream connection and the client's
  // connection share it, so a read's piece and the call's end reach the
  // stream in one round of it (with two, the governor may run on the other).
  return "[node]\naccess_log = \"off\"\nloops = 1\n"
         "[sources.up]\ntype = \"http\"\nbase_url = \"" +
         up.url(path) +
         "\"\n[routes.\"/v1/chat/completions\"]\nsources = [\"up\"]\n";
}

// The node's end of the connection from local port `client_port` to the
// node's listener, or nullptr.
const tcp_socket_facts* node_side(const std::vector<tcp_socket_facts>& all,
                                  uint16_t node_port, uint16_t client_port) {
  for (auto& s : all)
    if (s.local_port == node_port && s.peer_port == client_port)
      return &s;
  return nullptr;
}

const std::string stream_body =
    R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";

} // namespace

TEST_CASE("stream: the node's client and upstream connections have "
          "TCP_NODELAY",
          "[node][stream]") {
  test_upstream up;
  node_under_test node{node_config(up, "/ok")};
  stream_client client{node.port()};
  client.send(http::verb::post, "/v1/chat/completions",
              R"({"model":"m","messages":[]})");
  REQUIRE(client.read_until(R"({"ok":true})"));
  // Both connections stay open (keep-alive; the upstream one in the pool).
  auto all = tcp_sockets();
  auto client_port = client.stream.socket().local_endpoint().port();
  auto front = node_side(all, node.port(), client_port);
  REQUIRE(front != nullptr);
  CHECK(front->no_delay);
  // The node's connection to the upstream: its peer is the upstream's
  // port (the upstream's own accepted socket has it as its local port).
  int upstream_side = 0;
  for (auto& s : all)
    if (s.peer_port == up.port() && s.local_port != up.port()) {
      ++upstream_side;
      CHECK(s.no_delay);
    }
  CHECK(upstream_side == 1);
}

TEST_CASE("stream: a stream that came in one read leaves in one write - the "
          "header, the events and the end",
          "[node][stream]") {
  test_upstream up;
  node_under_test node{node_config(up, "/burst")};
  stream_client client{node.port()};
  auto client_port = client.stream.socket().local_endpoint().port();
  // The node accepts on its loop: wait for its end of the connection.
  std::vector<tcp_socket_facts> before_all;
  REQUIRE(eventually([&] {
    before_all = tcp_sockets();
    return node_side(before_all, node.port(), client_port) != nullptr;
  }));
  auto segments_before =
      node_side(before_all, node.port(), client_port)->data_segments_out;
  client.send(http::verb::post, "/v1/chat/completions", stream_body);
  REQUIRE(client.read_until("0\r\n\r\n"));
  CHECK(client.has("text/event-stream"));
  CHECK(client.has("part 0"));
  CHECK(client.has("part 2"));
  CHECK(client.has("data: [DONE]\n\n"));
  auto after_all = tcp_sockets();
  auto after = node_side(after_all, node.port(), client_port);
  REQUIRE(after != nullptr);
  // Before: the header, the events and the end were three writes.
  CHECK(after->data_segments_out - segments_before == 1);
}

TEST_CASE("stream: events that come apart still go out as they come, the "
          "first with the header",
          "[node][stream]") {
  test_upstream up;
  node_under_test node{node_config(up, "/stream")};
  stream_client client{node.port()};
  client.send(http::verb::post, "/v1/chat/completions", stream_body);
  REQUIRE(client.read_until("0\r\n\r\n"));
  // The first piece the client read has the header and the first event
  // (the upstream's 150 ms between events keeps each in a read of its own).
  REQUIRE(!client.pieces.empty());
  auto& first = client.pieces.front().second;
  CHECK(first.find("text/event-stream") != std::string::npos);
  CHECK(first.find("part 0") != std::string::npos);
  CHECK(client.arrival("part 2") - client.arrival("part 0") >= 250ms);
}
