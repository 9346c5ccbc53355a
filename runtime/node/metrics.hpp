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

  /// Records a finished call on `route` that took `elapsed`.
  void record(const std::string& route, const call_result& r, duration elapsed);

  /// Prometheus text exposition of the counters, plus `extra` lines
  /// (gauges read elsewhere, e.g. breaker states).
  std::string render(const std::string& extra = {}) const;

private:
  struct histogram {
    std::array<uint64_t, latency_buckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };

  mutable std::mutex mx_;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_;
  std::map<std::string, uint64_t> rejections_by_tier_;
  std::map<std::pair<std::string, std::string>, uint64_t> attempts_;
  std::map<std::string, uint64_t> verdicts_;
  std::map<std::string, histogram> latency_;
};

} // namespace sluice
