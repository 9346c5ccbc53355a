#include "runtime/node/metrics.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace sluice {

std::string prom_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    default:
      out += c;
    }
  }
  return out;
}

void node_metrics::record(const std::string& route, const call_result& r,
                          duration elapsed) {
  auto secs = std::chrono::duration<double>(elapsed).count();
  std::lock_guard<std::mutex> guard{mx_};
  ++calls_[{route, std::string{to_string(r.status)}}];
  if (r.status == call_status::tool_busy && r.busy_tier)
    ++rejections_by_tier_[std::string{to_string(*r.busy_tier)}];
  if (r.status == call_status::all_sources_exhausted)
    ++verdicts_[r.reason];
  for (auto& a : r.attempts)
    ++attempts_[{a.source, std::string{policy::to_string(a.kind)}}];
  latency_[route].add(latency_buckets, secs);
  if (!r.attempts.empty()) {
    auto upstream = duration::zero();
    for (auto& a : r.attempts)
      upstream += a.elapsed;
    auto overhead = std::max(elapsed - upstream, duration::zero());
    overhead_.add(overhead_buckets,
                  std::chrono::duration<double>(overhead).count());
  }
}

void node_metrics::histogram::add(const std::array<double, 15>& bounds,
                                  double secs) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (secs <= bounds[i])
      ++buckets[i];
  ++count;
  sum += secs;
}

void node_metrics::render_histogram(std::string& out, const std::string& name,
                                    const std::string& labels,
                                    const std::array<double, 15>& bounds,
                                    const histogram& h) {
  auto sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < bounds.size(); ++i)
    out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep,
                       bounds[i], h.buckets[i]);
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep,
                     h.count);
  auto braces = labels.empty() ? std::string{} : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n", name, braces, h.sum);
  out += fmt::format("{}_count{} {}\n", name, braces, h.count);
}

std::string node_metrics::render(const std::string& extra) const {
  std::lock_guard<std::mutex> guard{mx_};
  std::string out;
  auto line = [&](auto&&... xs) { out += fmt::format(xs...); };
  line("# HELP sluice_calls_total Calls finished, by route and outcome.\n");
  line("# TYPE sluice_calls_total counter\n");
  for (auto& [k, n] : calls_)
    line("sluice_calls_total{{route=\"{}\",outcome=\"{}\"}} {}\n",
         prom_label(k.first), prom_label(k.second), n);
  line("# HELP sluice_admission_rejections_total tool_busy rejections, by "
       "the tier waited on.\n");
  line("# TYPE sluice_admission_rejections_total counter\n");
  for (auto& [tier, n] : rejections_by_tier_)
    line("sluice_admission_rejections_total{{tier=\"{}\"}} {}\n",
         prom_label(tier), n);
  line("# HELP sluice_verdicts_total all_sources_exhausted verdicts, by "
       "reason.\n");
  line("# TYPE sluice_verdicts_total counter\n");
  for (auto& [reason, n] : verdicts_)
    line("sluice_verdicts_total{{reason=\"{}\"}} {}\n", prom_label(reason), n);
  line("# HELP sluice_attempts_total Attempts, by source and outcome.\n");
  line("# TYPE sluice_attempts_total counter\n");
  for (auto& [k, n] : attempts_)
    line("sluice_attempts_total{{source=\"{}\",outcome=\"{}\"}} {}\n",
         prom_label(k.first), prom_label(k.second), n);
  line("# HELP sluice_call_duration_seconds Call latency, by route.\n");
  line("# TYPE sluice_call_duration_seconds histogram\n");
  for (auto& [name, h] : latency_)
    render_histogram(out, "sluice_call_duration_seconds",
                     "route=\"" + prom_label(name) + "\"", latency_buckets, h);
  line("# HELP sluice_gateway_overhead_seconds A call's time minus its "
       "attempts' time at upstreams (calls that made attempts).\n");
  line("# TYPE sluice_gateway_overhead_seconds histogram\n");
  render_histogram(out, "sluice_gateway_overhead_seconds", "",
                   overhead_buckets, overhead_);
  out += extra;
  return out;
}

} // namespace sluice
