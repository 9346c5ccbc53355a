#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "messages/call.hpp"
#include <string_view>

namespace sluice {

/// `value` as a Prometheus label value: backslash, double quote and newline
/// escaped as the text exposition format requires (a source named `a"b` is
/// a valid TOML key).
std::string prom_label(std::string_view value);

/// Counters of a node, exposed as Prometheus text (`GET /metrics`). Recorded
/// once per finished call; thread-safe.
class node_metrics {
public:
  /// Upper bounds of the call latency histogram, in seconds.
  static constexpr std::array<double, 15> latency_buckets{
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
      2.5,   5,    10,    30,   60,  120,  300};

  /// Upper bounds of the gateway overhead histogram, in seconds.
  static constexpr std::array<double, 15> overhead_buckets{
      0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
      0.01,     0.025,   0.05,   0.1,     0.25,   1,     5};

  /// Records a finished call on `route` that took `elapsed`. A call that
  /// made attempts also records its gateway overhead: `elapsed` minus the
  /// attempts' time at upstreams (admission waits and backoff included).
  void record(const std::string& route, const call_result& r, duration elapsed);

  /// Prometheus text exposition of the counters, plus `extra` lines
  /// (gauges read elsewhere, e.g. breaker states).
  std::string render(const std::string& extra = {}) const;

private:
  struct histogram {
    std::array<uint64_t, latency_buckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;

    void add(const std::array<double, 15>& bounds, double secs);
  };

  static void render_histogram(std::string& out, const std::string& name,
                               const std::string& labels,
                               const std::array<double, 15>& bounds,
                               const histogram& h);

  mutable std::mutex mx_;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_;
  std::map<std::string, uint64_t> rejections_by_tier_;
  std::map<std::pair<std::string, std::string>, uint64_t> attempts_;
  std::map<std::string, uint64_t> verdicts_;
  std::map<std::string, histogram> latency_;
  histogram overhead_;
};

} // namespace sluice
