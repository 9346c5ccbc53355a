// The memory an object's one-at-a-time asynchronous operations reuse:
// Asio really allocates a read's state through it, the same block each
// time, and a second operation while one is pending still works.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include "sluice/actors/wire/handler_memory.hpp"

using namespace sluice;
namespace net = boost::asio;
using tcp = net::ip::tcp;

TEST_CASE("handler_memory: one block, reused - a second user gets the heap",
          "[handler_memory]") {
  handler_memory mem;
  void* a = mem.allocate(100);
  void* b = mem.allocate(100); // while `a` is in use
  CHECK(a != b);
  mem.deallocate(b);
  mem.deallocate(a);
  CHECK(mem.allocate(80) == a); // smaller: the same block
  mem.deallocate(a);
  void* c = mem.allocate(400); // larger: the block grows
  CHECK(mem.kept_bytes() == 400);
  mem.deallocate(c);
  CHECK(mem.allocate(400) == c);
  mem.deallocate(c);
}

TEST_CASE("handler_memory: Asio allocates each read of a socket in it",
          "[handler_memory]") {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc, {net::ip::make_address("127.0.0.1"), 0}};
  tcp::socket client{ioc}, server{ioc};
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  handler_memory mem;
  char buf[16];
  int reads = 0;
  std::function<void()> read_next = [&] {
    server.async_read_some(net::buffer(buf),
                           bind_memory(mem, [&](boost::system::error_code ec,
                                                std::size_t) {
                             if (ec)
                               return;
                             if (++reads < 3)
                               read_next();
                           }));
  };
  read_next();
  for (int i = 0; i < 3; ++i) {
    net::write(client, net::buffer("x", 1));
    ioc.run_one();
  }
  CHECK(reads == 3);
  CHECK(mem.kept_bytes() > 0); // the reads' state was allocated in it
}
