// The node's counters and histograms as Prometheus text: what each finished
// call adds, and the exposition format's rules (one HELP/TYPE per family,
// label escaping, cumulative buckets).

#include "sluice/runtime/node/metrics.hpp"

#include <chrono>
#include <string>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice;

namespace {

duration d(std::chrono::microseconds us) {
  return std::chrono::duration_cast<duration>(us);
}

call_result ok_after(std::string source, duration upstream) {
  call_result r;
  r.status = call_status::ok;
  r.source = source;
  r.attempts.push_back(
      {std::move(source), policy::outcome_kind::ok, 200, upstream});
  return r;
}

std::string text_of(const node_metrics& m) {
  prom_text out;
  m.write(out);
  return out.take();
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

size_t count_of(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (auto i = text.find(piece); i != std::string::npos;
       i = text.find(piece, i + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("calls are counted by route and outcome - attempts by source and "
          "outcome") {
  node_metrics m;
  m.record("/r", ok_after("a", d(900us)), d(1ms));
  m.record("/r", ok_after("a", d(900us)), d(1ms));
  call_result failed;
  failed.status = call_status::all_sources_exhausted;
  failed.reason = "stalled";
  failed.attempts.push_back({"a", policy::outcome_kind::timeout, 0, d(5ms)});
  failed.attempts.push_back(
      {"b", policy::outcome_kind::transient, 503, d(1ms)});
  m.record("/r", failed, d(7ms));
  call_result busy;
  busy.status = call_status::tool_busy;
  busy.busy_tier = tier_kind::session;
  m.record("/s", busy, d(2ms));
  auto t = text_of(m);
  CHECK(has_line(t, R"(sluice_calls_total{route="/r",outcome="ok"} 2)"));
  CHECK(has_line(
      t,
      R"(sluice_calls_total{route="/r",outcome="all_sources_exhausted"} 1)"));
  CHECK(has_line(t, R"(sluice_calls_total{route="/s",outcome="tool_busy"} 1)"));
  CHECK(has_line(t, R"(sluice_admission_rejections_total{tier="session"} 1)"));
  CHECK(has_line(t, R"(sluice_verdicts_total{reason="stalled"} 1)"));
  CHECK(has_line(t, R"(sluice_attempts_total{source="a",outcome="ok"} 2)"));
  CHECK(
      has_line(t, R"(sluice_attempts_total{source="a",outcome="timeout"} 1)"));
  CHECK(has_line(t,
                 R"(sluice_attempts_total{source="b",outcome="transient"} 1)"));
}

TEST_CASE("latency buckets are cumulative - each call counts in every bucket "
          "at or above its time") {
  node_metrics m;
  m.record("/r", ok_after("a", d(10ms)), d(30ms));
  m.record("/r", ok_after("a", d(1ms)), d(5ms)); // exactly on a bound
  auto t = text_of(m);
  auto bucket = [](const char* le) {
    return std::string{
               R"(sluice_call_duration_seconds_bucket{route="/r",le=")"} +
           le + "\"}";
  };
  CHECK(has_line(t, bucket("0.005") + " 1"));
  CHECK(has_line(t, bucket("0.025") + " 1"));
  CHECK(has_line(t, bucket("0.05") + " 2"));
  CHECK(has_line(t, bucket("300") + " 2"));
  CHECK(has_line(t, bucket("+Inf") + " 2"));
  CHECK(has_line(t, R"(sluice_call_duration_seconds_count{route="/r"} 2)"));
  auto sum = std::string{R"(sluice_call_duration_seconds_sum{route="/r"} )"};
  auto at = t.find(sum);
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(t.substr(at + sum.size())) == Approx(0.035));
}

TEST_CASE("the gateway overhead is a call's time minus its attempts' time - "
          "only for calls that made attempts") {
  node_metrics m;
  m.record("/r", ok_after("a", d(99900us)), d(100ms)); // 100 us overhead
  call_result busy;
  busy.status = call_status::tool_busy;
  m.record("/r", busy, d(3s)); // no attempt: not an overhead sample
  call_result odd = ok_after("a", d(2ms));
  m.record("/r", odd, d(1ms)); // attempts longer than the call: 0, not < 0
  auto t = text_of(m);
  // fmt writes the bound as Prometheus reads it: 5e-05.
  CHECK(has_line(t, R"(sluice_gateway_overhead_seconds_bucket{le="5e-05"} 1)"));
  CHECK(
      has_line(t, R"(sluice_gateway_overhead_seconds_bucket{le="0.0001"} 2)"));
  CHECK(has_line(t, R"(sluice_gateway_overhead_seconds_count 2)"));
}

TEST_CASE("each family has one HELP and one TYPE line before its samples - "
          "label values are escaped") {
  node_metrics m;
  m.record("/a\"b\\c\nd", ok_after("s", d(1ms)), d(2ms));
  m.record("/e", ok_after("s", d(1ms)), d(2ms));
  auto t = text_of(m);
  for (auto family :
       {"sluice_calls_total", "sluice_attempts_total",
        "sluice_call_duration_seconds", "sluice_gateway_overhead_seconds"}) {
    INFO(family);
    CHECK(count_of(t, std::string{"# HELP "} + family + " ") == 1);
    CHECK(count_of(t, std::string{"# TYPE "} + family + " ") == 1);
    CHECK(t.find(std::string{"# TYPE "} + family + " ") <
          t.find(std::string{"\n"} + family));
  }
  CHECK(
      has_line(t, R"(sluice_calls_total{route="/a\"b\\c\nd",outcome="ok"} 1)"));
  // No raw newline inside a sample: every line is a comment or a sample.
  CHECK(t.find("\nd\"") == std::string::npos);
}

TEST_CASE("metrics: the dashboard's figures") {
  node_metrics m;
  // 70 calls on one route, 1..70 ms each: the ring keeps the last 64.
  for (int i = 1; i <= 70; ++i) {
    auto r = ok_after("a", d(500us));
    r.stalled = d(std::chrono::microseconds{i * 100});
    r.productive = d(500us);
    m.record("/r", r, d(std::chrono::microseconds{i * 1000}));
  }
  call_result busy;
  busy.status = call_status::all_sources_exhausted;
  busy.reason = "stalled";
  m.record("/other", busy, d(2000us));
  auto f = m.read(3);
  CHECK(f.attempts["a"]["ok"] == 70);
  CHECK(f.overhead_count == 70);
  REQUIRE(f.slowest["/r"].size() == 3);
  CHECK(f.slowest["/r"][0].elapsed == d(70000us)); // slowest first
  CHECK(f.slowest["/r"][1].elapsed == d(69000us));
  CHECK(f.slowest["/r"][0].stalled == d(7000us));
  CHECK(f.slowest["/r"][0].productive == d(500us));
  CHECK(f.slowest["/r"][0].attempts == 1);
  CHECK(f.slowest["/r"][0].status == "ok");
  // An all_sources_exhausted call is shown by its reason.
  REQUIRE(f.slowest["/other"].size() == 1);
  CHECK(f.slowest["/other"][0].status == "stalled");
  // The ring is bounded: the first six calls (1..6 ms) were overwritten.
  auto all = m.read(1000);
  CHECK(all.slowest["/r"].size() == node_metrics::recent_calls_per_route);
  CHECK(all.slowest["/r"].back().elapsed == d(7000us));
}

TEST_CASE("metrics: tokens and cost by key, model and source - Prometheus "
          "counters, bounded in series") {
  node_metrics m;
  policy::token_usage u;
  u.prompt = 100;
  u.completion = 20;
  u.cached_prompt = 40;
  m.record_usage("team-a", "gpt-4o", "openai", u, policy::money{150'000});
  m.record_usage("team-a", "gpt-4o", "openai", u, policy::money{150'000});
  policy::token_usage guessed;
  guessed.prompt = 8;
  guessed.completion = 3;
  guessed.estimated = true;
  m.record_usage("", "local-\"x\"", "", guessed, std::nullopt);
  auto t = text_of(m);
  for (auto family : {"sluice_tokens_total", "sluice_cost_usd_total",
                      "sluice_usage_estimated_total"}) {
    INFO(family);
    CHECK(count_of(t, std::string{"# HELP "} + family + " ") == 1);
    CHECK(count_of(t, std::string{"# TYPE "} + family + " counter") == 1);
  }
  CHECK(has_line(
      t,
      R"(sluice_tokens_total{key="team-a",model="gpt-4o",source="openai",type="prompt"} 200)"));
  CHECK(has_line(
      t,
      R"(sluice_tokens_total{key="team-a",model="gpt-4o",source="openai",type="completion"} 40)"));
  CHECK(has_line(
      t,
      R"(sluice_tokens_total{key="team-a",model="gpt-4o",source="openai",type="cached"} 80)"));
  CHECK(has_line(
      t,
      R"(sluice_cost_usd_total{key="team-a",model="gpt-4o",source="openai"} 0.00300000)"));
  CHECK(has_line(
      t,
      R"(sluice_tokens_total{key="anonymous",model="local-\"x\"",source="none",type="prompt"} 8)"));
  CHECK(has_line(
      t,
      R"(sluice_usage_estimated_total{key="anonymous",model="local-\"x\"",source="none"} 1)"));
  // An unpriced series has no cost sample.
  CHECK(t.find(R"(sluice_cost_usd_total{key="anonymous")") ==
        std::string::npos);
  // A flood of model names: the series stop at the bound, the rest count
  // under "other".
  for (size_t i = 0; i < 3 * node_metrics::max_usage_series; ++i)
    m.record_usage("team-b", "m" + std::to_string(i), "s", u, std::nullopt);
  t = text_of(m);
  CHECK(count_of(t, "\nsluice_usage_estimated_total{") <=
        node_metrics::max_usage_series + 1);
  auto other =
      3 * node_metrics::max_usage_series - (node_metrics::max_usage_series - 2);
  CHECK(has_line(
      t,
      R"(sluice_tokens_total{key="team-b",model="other",source="s",type="prompt"} )" +
          std::to_string(100 * other)));
}
