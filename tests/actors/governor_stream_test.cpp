// Streamed calls through the governor, in virtual time: chunks reach the
// caller as they arrive and before the result; retries and failover stop
// with the first chunk; the TTFT bounds the first chunk, not the stream.

#include <chrono>
#include <memory>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <catch2/catch.hpp>

#include "governor_fixture.hpp"
#include "sluice/messages/atoms.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::testing;
using policy::outcome_kind;

namespace {

policy::call_policy stream_policy() {
  policy::call_policy p;
  p.max_attempts = 3;
  p.stall_window = 60s;
  p.attempt_timeout = 30s;
  p.backoff = {1s, 10s, 0.0};
  p.poll_interval = 30s;
  return p;
}

test_source streaming(std::string name, duration latency,
                      double transient = 0, double breaks = 0) {
  test_source s;
  s.name = std::move(name);
  sim_phase p;
  p.latency_min = p.latency_max = latency;
  p.transient_rate = transient;
  p.stream_break_rate = breaks;
  s.sim.phases = {p};
  // A fixed body: three generic chunks per stream, whatever the payload.
  s.sim.body = fallback_body;
  s.breaker = lenient_breaker();
  return s;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct stream_fixture : governor_fixture {
  stream_fixture() { stream_calls = true; }
};

} // namespace

TEST_CASE_METHOD(stream_fixture,
                 "a streamed call passes each chunk on as it arrives and "
                 "before its result") {
  make_route({streaming("a", 4s)}, stream_policy());
  auto start = now();
  auto c = call();
  run_until_done(c, 60s);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK(c.result().streamed);
  CHECK(c.result().source == "a");
  CHECK(c.result().body.empty()); // the answer went out as chunks
  auto& chunks = c.report->chunks;
  REQUIRE(chunks.size() == 4);
  // Three content chunks spread over the 4 s latency, then [DONE].
  CHECK(chunks[0].first - start == 1s);
  CHECK(chunks[1].first - start == 2s);
  CHECK(chunks[2].first - start == 3s);
  CHECK(has(chunks[0].second, "simulated chunk 0"));
  CHECK(has(chunks[2].second, "simulated chunk 2"));
  CHECK(chunks[3].second == "data: [DONE]\n\n");
  CHECK(chunks[3].first <= c.report->done_at);
}

TEST_CASE_METHOD(stream_fixture,
                 "once a chunk went out a broken stream is neither retried "
                 "nor failed over") {
  make_route({streaming("a", 4s, 0, 1.0), streaming("b", 1s)},
             stream_policy());
  auto c = call();
  run_until_done(c, 60s);
  REQUIRE(c.done());
  CHECK(c.result().status == call_status::upstream_error);
  CHECK(c.result().reason == "stream_interrupted");
  CHECK(c.result().streamed);
  CHECK(c.result().source == "a");
  CHECK(c.report->chunks.size() == 1); // the caller got the first chunk only
  CHECK(c.result().attempts.size() == 1);
  CHECK(stats(1).attempts == 0); // "b" was never tried
  CHECK(stats(0).stream_breaks == 1);
}

TEST_CASE_METHOD(stream_fixture,
                 "before its first chunk a streamed call fails over as "
                 "usual") {
  make_route({streaming("a", 1s, 1.0), streaming("b", 2s)}, stream_policy());
  auto c = call();
  run_until_done(c, 60s);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK(c.result().source == "b");
  REQUIRE(c.result().attempts.size() == 2);
  CHECK(c.result().attempts[0].kind == outcome_kind::transient);
  CHECK(c.report->chunks.size() == 4); // all of them from "b"
}

TEST_CASE_METHOD(stream_fixture,
                 "the TTFT bounds a stream's first chunk, not the whole "
                 "stream") {
  auto pol = stream_policy();
  pol.ttft_timeout = 2s;
  SECTION("a first chunk in time: the 6 s stream completes") {
    make_route({streaming("a", 6s)}, pol); // first chunk at 1.5 s
    auto c = call();
    run_until_done(c, 60s);
    REQUIRE(c.done());
    CHECK(c.result().ok());
    CHECK(c.report->chunks.size() == 4);
    CHECK(c.result().attempts.size() == 1);
  }
  SECTION("no chunk within the TTFT: a timeout, then the next source") {
    make_route({streaming("slow", 10s), streaming("b", 1s)}, pol);
    auto start = now();
    auto c = call();
    run_until_done(c, 60s);
    REQUIRE(c.done());
    CHECK(c.result().ok());
    CHECK(c.result().source == "b");
    REQUIRE(c.result().attempts.size() == 2);
    CHECK(c.result().attempts[0].kind == outcome_kind::timeout);
    CHECK(c.result().attempts[0].elapsed == 2s);
    CHECK(stats(0).cancelled == 1); // the slow attempt was closed
    CHECK(c.report->chunks.size() == 4);
    CHECK(c.report->chunks.front().first - start > 2s);
  }
}

TEST_CASE_METHOD(governor_fixture,
                 "a unary call on a streaming-capable source gets the whole "
                 "body and no chunks") {
  make_route({streaming("a", 1s)}, stream_policy());
  auto c = call();
  run_until_done(c, 60s);
  REQUIRE(c.done());
  CHECK(c.result().ok());
  CHECK_FALSE(c.result().streamed);
  CHECK(c.result().body == R"({"object":"simulated","ok":true})");
  CHECK(c.report->chunks.empty());
}

TEST_CASE_METHOD(stream_fixture,
                 "a finished streamed call is freed at once, not when its "
                 "TTFT timer would have fired") {
  auto pol = stream_policy();
  pol.ttft_timeout = 60s;
  make_route({streaming("a", 2s)}, pol);
  // The callback form: nothing but the governor itself holds it.
  auto result = std::make_shared<std::optional<call_result>>();
  governor_config cfg;
  cfg.request.route = "test";
  cfg.request.stream = true;
  cfg.admission = fresh_path();
  cfg.route = route;
  cfg.on_done = [result](call_result r) { *result = std::move(r); };
  cfg.on_chunk = [](std::string) {};
  auto gov = spawn_governor(sys, std::move(cfg));
  caf::anon_send(gov, call_atom_v);
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(gov);
  gov = nullptr;
  run();
  advance(3s); // the stream takes 2 s; the TTFT timer would fire at 60 s
  REQUIRE(result->has_value());
  CHECK((*result)->ok());
  CHECK(weak.lock() == nullptr); // no reference left: the memory is back
}
