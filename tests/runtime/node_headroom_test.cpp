// A provider's own rate limits obeyed before they bite (SPEC §12): an
// upstream that says in OpenAI's x-ratelimit-*-tokens headers what it has
// left, and answers 429 when a request's tokens are not there. The same
// load through the node with the headers obeyed and ignored: obeyed, the
// upstream sees no 429 (calls wait for its reset, stall time); ignored, it
// sees many. Real sockets on loopback.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "loopback_http.hpp"
#include "node_fixture.hpp"
#include "test_upstream.hpp"

using namespace sluice;
using sluice::testing::node_under_test;
using sluice::testing::test_upstream;
using namespace sluice::testing::loopback;

namespace {

// The node reserves 1 + 4 + 3 prompt tokens and max_tokens = 92: 100, the
// upstream's charge per request.
const std::string call_body =
    R"({"model":"m","max_tokens":92,"messages":[{"role":"user","content":"hi"}]})";

struct figures {
  int ok = 0;
  int other = 0;
  int upstream_429s = 0;
  int upstream_requests = 0;
  nlohmann::json limits; // /status sources[0].provider_limits
};

// One call, then six clients, five calls each (3,100 tokens against 1,000
// a second).
figures run_load(bool obey) {
  test_upstream upstream;
  node_under_test node{
      "[node]\naccess_log = \"off\"\n"
      "[sources.provider]\ntype = \"http\"\nbase_url = \"" +
      upstream.url("/limited") +
      "\"\nobey_rate_limit_headers = " + (obey ? "true" : "false") +
      "\n[routes.\"/v1/chat/completions\"]\nkind = \"chat\"\n"
      "sources = [\"provider\"]\n"};
  // One call first, alone: the node has seen the upstream's headers once
  // before the load (a call sent before any answer said anything is
  // counted with no token estimate; see the README).
  auto first = exchange(node.port(), http::verb::post, "/v1/chat/completions",
                        call_body);
  std::atomic<int> ok{first.status == 200 ? 1 : 0};
  std::atomic<int> other{first.status == 200 ? 0 : 1};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c)
    clients.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        auto r = exchange(node.port(), http::verb::post,
                          "/v1/chat/completions", call_body);
        (r.status == 200 ? ok : other)++;
      }
    });
  for (auto& t : clients)
    t.join();
  auto st = exchange(node.port(), http::verb::get, "/status").doc();
  return {ok.load(), other.load(), upstream.limited_429s.load(),
          upstream.requests.load(), st["sources"][0]["provider_limits"]};
}

} // namespace

TEST_CASE("node: an upstream's own token limit, obeyed - the same load that "
          "met many 429s meets none",
          "[node][spend]") {
  auto ignored = run_load(false);
  auto obeyed = run_load(true);
  INFO("ignored: " << ignored.ok << " ok, " << ignored.other << " other, "
                   << ignored.upstream_429s << " 429s of "
                   << ignored.upstream_requests << " upstream requests");
  INFO("obeyed: " << obeyed.ok << " ok, " << obeyed.other << " other, "
                  << obeyed.upstream_429s << " 429s of "
                  << obeyed.upstream_requests << " upstream requests");
  CHECK(ignored.upstream_429s >= 5);
  CHECK(obeyed.upstream_429s == 0);
  CHECK(obeyed.ok == 31);
  CHECK(obeyed.upstream_requests == 31);
  // The node held calls back, and knows what the upstream has left.
  CHECK(obeyed.limits["held_back"].get<int>() >= 1);
  CHECK(obeyed.limits["tokens_in_flight"] == 0);
  CHECK(obeyed.limits["requests_in_flight"] == 0);
  CHECK(ignored.limits.is_null()); // not kept when not obeyed
}
