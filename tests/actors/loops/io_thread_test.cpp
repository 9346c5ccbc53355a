// A loop of ours outlives a handler that throws: the exception is reported
// and the loop goes on, whatever was thrown and even if the report throws.

#include "sluice/actors/loops/io_thread.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

using sluice::upstream::run_until_stopped;
namespace net = boost::asio;

TEST_CASE("a handler that throws is reported and the loop goes on") {
  net::io_context loop;
  std::vector<std::string> reports;
  bool after = false;
  net::post(loop, [] { throw std::runtime_error{"boom"}; });
  net::post(loop, [] { throw 42; });
  net::post(loop, [&] {
    after = true;
    loop.stop();
  });
  run_until_stopped(loop, [&](const char* what) {
    reports.emplace_back(what != nullptr ? what : "(not an exception)");
  });
  CHECK(reports == std::vector<std::string>{"boom", "(not an exception)"});
  CHECK(after);
}

TEST_CASE("a report that throws does not end the loop") {
  net::io_context loop;
  int reports = 0;
  bool after = false;
  net::post(loop, [] { throw std::runtime_error{"boom"}; });
  net::post(loop, [&] {
    after = true;
    loop.stop();
  });
  run_until_stopped(loop, [&](const char*) {
    ++reports;
    throw std::runtime_error{"the log is broken"};
  });
  CHECK(reports == 1);
  CHECK(after);
}
