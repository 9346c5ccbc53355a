#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <initializer_list>
#include <string_view>

#include <fmt/format.h>

#include "sluice/messages/call.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"

namespace sluice {

/// `value` as a Prometheus label value: backslash, double quote and newline
/// escaped as the text exposition format requires (a source named `a"b` is
/// a valid TOML key).
std::string prom_label(std::string_view value);

/// The one writer of Prometheus' text exposition format (0.0.4) in the
/// node: `GET /metrics` is the node's counters, the front's gauges and the
/// process's gauges, all written through one of these, so the format's
/// rules (HELP and TYPE before a family's samples, label escaping, a
/// histogram's `_bucket` / `_sum` / `_count`) live here only.
class prom_text {
public:
  /// One label: its name and its value (escaped when written).
  using label = std::pair<std::string_view, std::string_view>;
  using labels = std::initializer_list<label>;

  /// Starts the family `name`: its `# HELP` and `# TYPE` lines. `type` is
  /// "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type,
              std::string_view help);

  /// A sample `name{labels} value`, the value as `fmt` writes it.
  template <class T>
  void sample(std::string_view name, labels ls, const T& value) {
    sample_text(name, ls, fmt::format("{}", value));
  }

  /// A sample whose value is already text (e.g. a fixed precision).
  void sample_text(std::string_view name, labels ls, std::string_view value);

  /// A histogram's samples: cumulative `_bucket` lines for `bounds` and
  /// `+Inf`, then `_sum` and `_count`.
  template <size_t N>
  void histogram(std::string_view name, labels ls,
                 const std::array<double, N>& bounds,
                 const std::array<uint64_t, N>& buckets, uint64_t count,
                 double sum) {
    for (size_t i = 0; i < N; ++i)
      bucket(name, ls, fmt::format("{}", bounds[i]), buckets[i]);
    bucket(name, ls, "+Inf", count);
    sample(std::string{name} + "_sum", ls, sum);
    sample(std::string{name} + "_count", ls, count);
  }

  /// Appends `text`, written by another `prom_text`.
  void append(const std::string& text) { out_ += text; }

  /// The text so far.
  const std::string& text() const noexcept { return out_; }

  /// Takes the text out.
  std::string take() noexcept { return std::move(out_); }

private:
  void bucket(std::string_view name, labels ls, std::string_view le,
              uint64_t n);

  std::string out_;
};

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

  /// The most (key, model, source) series of the token and cost counters:
  /// model names come from clients (a route's glob lets any through), so
  /// a call beyond counts under model "other".
  static constexpr size_t max_usage_series = 1024;

  /// Records what a finished call used (SPEC §12) under its client key
  /// (empty: anonymous), model and answering source; `cost`: none when
  /// the model has no price.
  void record_usage(const std::string& key, const std::string& model,
                    const std::string& source, const policy::token_usage& u,
                    std::optional<policy::money> cost);

  /// The most (server, method, name) series of the MCP call counter:
  /// names come from clients (a resource's URI), so a call beyond counts
  /// under name "other".
  static constexpr size_t max_mcp_series = 1024;

  /// Records a finished MCP call (SPEC §13): its server, method, tool (or
  /// prompt, or resource URI) and how it ended (`ok`, `tool_error` for a
  /// result with `isError`, `rpc_error`, `tool_busy`, `unavailable`,
  /// `cancelled`, `backend_error`).
  void record_mcp(const std::string& server, const std::string& method,
                  const std::string& name, const std::string& outcome);

  /// Writes the counters and histograms to `out`.
  void write(prom_text& out) const;

  /// Finished calls kept per route for the slowest-calls view.
  static constexpr size_t recent_calls_per_route = 64;

  /// One finished call, as the dashboard's stall-budget bars show it.
  struct call_figures {
    std::string status;
    uint32_t attempts = 0;
    duration elapsed{};
    duration stalled{};
    duration productive{};
    /// When it ended (wall clock, ms since the epoch).
    int64_t at_ms = 0;
  };

  /// What `GET /status` shows of the counters: attempts per source and
  /// outcome, the overhead histogram (cumulative, for rates between two
  /// reads), and the `n` slowest of each route's recent calls.
  struct figures {
    std::map<std::string, std::map<std::string, uint64_t>> attempts;
    std::array<uint64_t, 15> overhead_counts{};
    uint64_t overhead_count = 0;
    double overhead_sum = 0;
    std::map<std::string, std::vector<call_figures>> slowest;
  };

  figures read(size_t n) const;

private:
  struct histogram {
    std::array<uint64_t, latency_buckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;

    void add(const std::array<double, 15>& bounds, double secs);
  };

  mutable std::mutex mx_;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_;
  std::map<std::string, uint64_t> rejections_by_tier_;
  std::map<std::pair<std::string, std::string>, uint64_t> attempts_;
  std::map<std::string, uint64_t> verdicts_;
  std::map<std::string, histogram> latency_;
  histogram overhead_;
  /// Per route: a ring of its last `recent_calls_per_route` calls.
  struct recent_ring {
    std::vector<call_figures> calls;
    size_t next = 0;
  };
  std::map<std::string, recent_ring> recent_;
  struct usage_sums {
    uint64_t prompt = 0;
    uint64_t completion = 0;
    uint64_t cached = 0;
    uint64_t estimated = 0;
    policy::money cost = 0;
    bool priced = false;
  };
  /// (key, model, source) -> what their calls used.
  std::map<std::tuple<std::string, std::string, std::string>, usage_sums>
      usage_;
  /// (server, method, name) -> outcome -> calls.
  std::map<std::tuple<std::string, std::string, std::string>,
           std::map<std::string, uint64_t>>
      mcp_;
};

} // namespace sluice
