// sluice-node under hostile traffic (SPEC §7), over real sockets on
// loopback: the outside review's findings against the front, each as a
// test. Upstreams are scripted (tests/fakes/script_upstream.hpp) so they can
// stream fast, answer errors in floods or hang.

#include "node_hostile_shared.hpp"

using namespace node_hostile_test_support;

// -- critical: the streaming writer -------------------------------------------

TEST_CASE("hostile: a client reading a fast 20,000-event stream gets all of "
          "it, twice",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return fast_stream(up, s, 20000);
  }};
  auto request = post_text("/v1/chat/completions", R"({"stream":true})");
  for (int round = 0; round < 2; ++round) {
    stream_client c{node.port()};
    net::write(c.stream.socket(), net::buffer(request));
    REQUIRE(c.read_until("0\r\n\r\n", 30s));
    CHECK(c.all.rfind("HTTP/1.1 200", 0) == 0);
    auto body = dechunk(c.all);
    CHECK(count(body, "chat.completion.chunk") == 20000);
    CHECK(count(body, "\n\n") == 20001);
    CHECK(c.has("data: [DONE]"));
    CHECK_FALSE(c.has("event: error"));
  }
  CHECK(node.healthy());
  CHECK(node.status()["refused"]["stream_clients_dropped"] == 0);
}

TEST_CASE("hostile: a streamed call whose client never reads is dropped and "
          "cancelled, the node unharmed",
          "[node][hostile]") {
  // 30 MB of events: far past the 8 MiB a slow client may have queued.
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return fast_stream(up, s, 250000);
  }};
  {
    silent_client c{node.port(),
                    post_text("/v1/chat/completions", R"({"stream":true})")};
    REQUIRE(eventually(
        [&] { return node.status()["refused"]["stream_clients_dropped"] == 1; },
        20s));
    // Dropped means cancelled: nothing is held for it any more.
    CHECK(eventually([&] { return node.status()["calls_in_flight"] == 0; }));
  }
  CHECK(node.healthy());
  // The node still streams to a reader.
  stream_client c{node.port()};
  net::write(c.stream.socket(), net::buffer(post_text("/v1/chat/completions",
                                                      R"({"stream":true})")));
  CHECK(c.read_until("tok1000\"", 20s));
  c.close();
}

TEST_CASE("hostile: 200 /events clients that never read, while thousands of "
          "verdicts are published",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return not_found(up, s);
  }};
  std::vector<std::unique_ptr<silent_client>> silent;
  for (int i = 0; i < 200; ++i)
    silent.push_back(std::make_unique<silent_client>(
        node.port(), "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  REQUIRE(eventually(
      [&] { return node.status()["limits"]["event_subscribers"] == 200; }));
  // Each 404 is a verdict published to every subscriber (~90 bytes each).
  std::vector<std::thread> callers;
  std::atomic<int> answered{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      stream_client c{node.port()};
      for (int i = 0; i < 1500; ++i) {
        auto body = R"({"i":)" + std::to_string(i) + "}";
        c.send(http::verb::post, "/v1/chat/completions", body);
        auto r = read_reply(c.stream, c.ioc);
        if (r.status == 404)
          ++answered;
      }
    });
  for (auto& t : callers)
    t.join();
  CHECK(answered == 6000);
  // 6,000 verdicts x ~90 bytes pass the 256 KiB budget of each silent one
  // (and what the socket buffers take).
  CHECK(eventually([&] {
    return node.status()["refused"]["stream_clients_dropped"] == 200;
  }));
  CHECK(node.status()["limits"]["event_subscribers"] == 0);
  CHECK(node.healthy());
}

// -- critical: invalid UTF-8 --------------------------------------------------

TEST_CASE("hostile: invalid UTF-8 in a path, a target or a session id gets a "
          "JSON error, never a crash",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  auto r = raw_exchange(node.port(),
                        "GET /\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  CHECK(r.status == 404);
  REQUIRE(r.doc().is_object());
  CHECK(r.doc()["error"]["code"] == "not_found");
  r = raw_exchange(node.port(),
                   post_text("/v1/chat/completions\xc3\x28", "{}"));
  CHECK(r.status == 404);
  CHECK(r.doc().is_object());
  r = raw_exchange(node.port(), post_text("/v1/chat/completions", "{}",
                                          "X-Session-Id: \xff\xfe\r\n"));
  CHECK(r.status == 400);
  CHECK(r.doc()["error"]["code"] == "bad_request");
  // A body whose strings are not UTF-8 is not JSON.
  r = raw_exchange(node.port(),
                   post_text("/v1/chat/completions", "{\"m\":\"\xff\"}"));
  CHECK(r.status == 400);
  CHECK(node.status().is_object());
  CHECK(node.healthy());
}

// -- medium: /events bounded
// ----------------------------------------------------

TEST_CASE("hostile: /events subscribers leave with their connection, are "
          "capped, get a snapshot and pings",
          "[node][hostile]") {
  std::string config = hostile_config;
  config.replace(config.find("max_event_subscribers = 300"), 27,
                 "max_event_subscribers = 3  ");
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
                      return not_found(up, s);
                    },
                    config};
  // Connect-and-close floods leave nothing behind (no event published
  // meanwhile to find the dead ones).
  for (int i = 0; i < 500; ++i) {
    stream_client c{node.port()};
    c.send(http::verb::get, "/events");
    REQUIRE(c.read_until("event: snapshot"));
    c.close();
  }
  CHECK(eventually(
      [&] { return node.status()["limits"]["event_subscribers"] == 0; }));
  // The cap: three subscribers, the fourth is refused with a JSON 503.
  std::vector<std::unique_ptr<stream_client>> subs;
  for (int i = 0; i < 3; ++i) {
    subs.push_back(std::make_unique<stream_client>(node.port()));
    subs.back()->send(http::verb::get, "/events");
    REQUIRE(subs.back()->read_until("event: snapshot"));
  }
  CHECK(subs[0]->has(R"("source":"up")"));
  auto r = exchange(node.port(), http::verb::get, "/events");
  CHECK(r.status == 503);
  CHECK(r.doc()["error"]["code"] == "overloaded");
  // Pings every 0.2 s keep the stream alive.
  CHECK(subs[0]->read_until(": ping", 3s));
}

// -- low: HTTP/1.1 framing (RFC 9112)
// -------------------------------------------

TEST_CASE("hostile: ambiguous framing is refused, absolute-form and Expect: "
          "100-continue work",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(
        s, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}");
  }};
  auto p = node.port();
  auto smuggle = [&](const std::string& te) {
    return raw_exchange(
        p, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
           "Transfer-Encoding: " +
               te + "\r\nContent-Length: 2\r\n\r\n{}");
  };
  CHECK(smuggle("chunked, gzip").status == 400);
  CHECK(smuggle("xchunked").status == 400);
  CHECK(smuggle("chunked").status == 400); // with Content-Length
  CHECK(raw_exchange(p,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Transfer-Encoding: gzip\r\n\r\n")
            .status == 400);
  CHECK(raw_exchange(p, "GET /healthz HTTP/1.1\r\n\r\n").status == 400);
  CHECK(raw_exchange(p, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
            .status == 400);
  CHECK(raw_exchange(p, "GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: "
                        "127.0.0.1\r\n\r\n")
            .status == 200);
  CHECK(
      raw_exchange(p, post_text("http://node:1/v1/chat/completions?x=1", "{}"))
          .status == 200);
  // A chunked body is fine.
  CHECK(raw_exchange(p,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            .status == 200);
  // Expect: 100-continue: the 100 comes before the body is sent.
  stream_client c{p};
  std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  net::write(c.stream.socket(), net::buffer(head));
  REQUIRE(c.read_until("HTTP/1.1 100 Continue\r\n\r\n", 2s));
  net::write(c.stream.socket(), net::buffer(std::string{"{}"}));
  CHECK(c.read_until("{\"ok\":true}"));
  CHECK(c.has("HTTP/1.1 200"));
}

TEST_CASE("hostile: a request body is read whole however it arrives: with "
          "its header, split mid-body, chunked, or followed by a pipelined "
          "request in the same write",
          "[node][hostile]") {
  // The upstream answers each request with its own body.
  hostile_node node{[](script_upstream& up, tcp::socket& s,
                       const std::string& request) {
    auto body = request.substr(request.find("\r\n\r\n") + 4);
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body);
  }};
  auto write = [](stream_client& c, const std::string& bytes) {
    net::write(c.stream.socket(), net::buffer(bytes));
  };
  {
    // The header and the whole body in one write (parsed with the header).
    stream_client c{node.port()};
    write(c, post_text("/v1/chat/completions", R"({"n":1})"));
    REQUIRE(c.read_until(R"({"n":1})"));
  }
  {
    // The header, then the body in two pieces, each a while later.
    stream_client c{node.port()};
    auto text = post_text("/v1/chat/completions", R"({"n":"split"})");
    auto cut = text.find("\r\n\r\n") + 4 + 5;
    write(c, text.substr(0, text.find("\r\n\r\n") + 4));
    std::this_thread::sleep_for(50ms);
    write(c, text.substr(text.find("\r\n\r\n") + 4, 5));
    std::this_thread::sleep_for(50ms);
    write(c, text.substr(cut));
    REQUIRE(c.read_until(R"({"n":"split"})"));
  }
  {
    // Chunked, the last chunk a while after the first.
    stream_client c{node.port()};
    write(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"n\":\r\n");
    std::this_thread::sleep_for(50ms);
    write(c, "9\r\n\"chunked\"\r\n1\r\n}\r\n0\r\n\r\n");
    REQUIRE(c.read_until(R"({"n":"chunked"})"));
  }
  {
    // Two requests in one write: both answered, in order, on one
    // connection.
    stream_client c{node.port()};
    write(c, post_text("/v1/chat/completions", R"({"n":"first"})") +
                 post_text("/v1/chat/completions", R"({"n":"second"})"));
    REQUIRE(c.read_until(R"({"n":"second"})"));
    CHECK(c.all.find(R"({"n":"first"})") < c.all.find(R"({"n":"second"})"));
  }
  {
    // A chunk over node.max_body_bytes announced in the bytes that came
    // with the header: 413, found by the parse there.
    stream_client c{node.port()};
    write(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n1E8481\r\n{\"n\":");
    REQUIRE(c.read_until("HTTP/1.1 413"));
  }
  CHECK(node.upstream->requests == 5); // the pipelined pair is two
}

TEST_CASE("hostile: session ids are validated and bodies read with a depth "
          "limit",
          "[node][hostile]") {
  hostile_node node{[](script_upstream& up, tcp::socket& s, auto&&...) {
    return up.send(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  }};
  auto p = node.port();
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}",
                 std::string(128, 'a'))
            .status == 200);
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}",
                 std::string(129, 'a'))
            .status == 400);
  CHECK(exchange(p, http::verb::post, "/v1/chat/completions", "{}", "a b")
            .status == 400);
  auto r = raw_exchange(p, post_text("/v1/chat/completions", "{}",
                                     "X-Session-Id: a\r\nX-Session-Id: b\r\n"));
  CHECK(r.status == 400);
  // A megabyte of '[' is refused at depth 64, without a document.
  r = exchange(p, http::verb::post, "/v1/chat/completions",
               "{\"a\":" + std::string(1000000, '['));
  CHECK(r.status == 400);
  CHECK(r.doc()["error"]["message"].get<std::string>().find("deeper") !=
        std::string::npos);
  CHECK(node.upstream->requests == 1);
}

// -- high: descriptors and connections
// ------------------------------------------
