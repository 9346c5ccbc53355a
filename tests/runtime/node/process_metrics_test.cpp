// The process gauges: read from this test process's own /proc/self.

#include <array>
#include <chrono>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "sluice/runtime/node/metrics.hpp"
#include "sluice/runtime/node/process_metrics.hpp"

using namespace sluice::node;

namespace {

// Each sample line's value by metric name; fails the test on a line that
// is neither a `# HELP`/`# TYPE ... gauge` comment nor `name value`.
std::map<std::string, double> samples_of(const std::string& text) {
  static const std::regex help{R"(# HELP [a-z_]+ \S.*)"};
  static const std::regex type{R"(# TYPE [a-z_]+ gauge)"};
  static const std::regex sample{R"(([a-z_]+) ([0-9]+(\.[0-9]+)?))"};
  std::map<std::string, double> out;
  std::istringstream in{text};
  int line_no = 0;
  for (std::string line; std::getline(in, line); ++line_no) {
    INFO("line " << line_no << ": " << line);
    std::smatch m;
    switch (line_no % 3) {
    case 0:
      CHECK(std::regex_match(line, help));
      break;
    case 1:
      CHECK(std::regex_match(line, type));
      break;
    default:
      REQUIRE(std::regex_match(line, m, sample));
      out[m[1]] = std::stod(m[2]);
    }
  }
  CHECK(line_no % 3 == 0);
  CHECK((text.empty() || text.back() == '\n'));
  return out;
}

} // namespace

TEST_CASE("process metrics: every gauge is read and well-formed") {
  auto text = process_metrics_text();
  auto samples = samples_of(text);
  REQUIRE(samples.size() == 5);
  CHECK(samples["process_resident_memory_bytes"] > 0);
  CHECK(samples["process_open_fds"] > 0); // stdin, stdout, stderr at least
  CHECK(samples["process_max_fds"] >= samples["process_open_fds"]);
  CHECK(samples["process_threads"] >= 1);
  auto now = std::chrono::duration<double>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  // Started before now and, for a test run, within the last day.
  CHECK(samples["process_start_time_seconds"] <= now + 1);
  CHECK(samples["process_start_time_seconds"] > now - 86400);
}

TEST_CASE("process metrics: each gauge has its HELP and TYPE lines") {
  auto text = process_metrics_text();
  for (auto name :
       {"process_resident_memory_bytes", "process_open_fds", "process_max_fds",
        "process_threads", "process_start_time_seconds"}) {
    INFO(name);
    CHECK(text.find(std::string{"# HELP "} + name + " ") != std::string::npos);
    CHECK(text.find(std::string{"# TYPE "} + name + " gauge\n") !=
          std::string::npos);
  }
}

TEST_CASE("process metrics: the thread count follows the process") {
  auto before = read_process_figures().threads;
  REQUIRE(before);
  std::thread t{
      [] { std::this_thread::sleep_for(std::chrono::milliseconds{200}); }};
  auto during = read_process_figures().threads;
  t.join();
  REQUIRE(during);
  CHECK(*during == *before + 1);
}

TEST_CASE("process metrics: a figure that could not be read is left out") {
  process_figures f;
  CHECK(process_metrics_text(f).empty());
  f.threads = 3;
  f.start_time_seconds = 1764600000.25;
  auto text = process_metrics_text(f);
  CHECK(text == "# HELP process_threads Number of OS threads in the process.\n"
                "# TYPE process_threads gauge\n"
                "process_threads 3\n"
                "# HELP process_start_time_seconds Start time of the process "
                "since the Unix epoch in seconds.\n"
                "# TYPE process_start_time_seconds gauge\n"
                "process_start_time_seconds 1764600000.25\n");
  CHECK(samples_of(text).size() == 2);
}

TEST_CASE("prometheus text: one writer for counters, histograms and gauges") {
  // The node's counters, the front's gauges and the process's gauges all go
  // through sluice::prom_text: HELP and TYPE lead each family, label values
  // are escaped, a histogram's buckets are cumulative and end in +Inf.
  sluice::prom_text out;
  out.family("x_total", "counter", "Things.");
  out.sample("x_total", {{"source", "a\"b"}, {"k", "v"}}, 3);
  out.sample("x_total", {}, 4);
  out.histogram("d_seconds", {{"route", "/r"}}, std::array<double, 2>{0.5, 1},
                std::array<uint64_t, 2>{1, 2}, 3, 2.75);
  out.histogram("o_seconds", {}, std::array<double, 1>{0.25},
                std::array<uint64_t, 1>{0}, 1, 0.5);
  CHECK(out.text() == "# HELP x_total Things.\n"
                      "# TYPE x_total counter\n"
                      "x_total{source=\"a\\\"b\",k=\"v\"} 3\n"
                      "x_total 4\n"
                      "d_seconds_bucket{route=\"/r\",le=\"0.5\"} 1\n"
                      "d_seconds_bucket{route=\"/r\",le=\"1\"} 2\n"
                      "d_seconds_bucket{route=\"/r\",le=\"+Inf\"} 3\n"
                      "d_seconds_sum{route=\"/r\"} 2.75\n"
                      "d_seconds_count{route=\"/r\"} 3\n"
                      "o_seconds_bucket{le=\"0.25\"} 0\n"
                      "o_seconds_bucket{le=\"+Inf\"} 1\n"
                      "o_seconds_sum 0.5\n"
                      "o_seconds_count 1\n");
  // The process's gauges are appended through the same writer.
  process_figures f;
  f.threads = 2;
  write_process_metrics(out, f);
  CHECK(out.text().find("# TYPE process_threads gauge\nprocess_threads 2\n") !=
        std::string::npos);
}
