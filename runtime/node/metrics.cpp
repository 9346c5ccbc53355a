#include "runtime/node/metrics.hpp"

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
  auto& h = latency_[route];
  for (size_t i = 0; i < latency_buckets.size(); ++i)
    if (secs <= latency_buckets[i])
      ++h.buckets[i];
  ++h.count;
  h.sum += secs;
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
  for (auto& [name, h] : latency_) {
    auto route = prom_label(name);
    for (size_t i = 0; i < latency_buckets.size(); ++i)
      line("sluice_call_duration_seconds_bucket{{route=\"{}\",le=\"{}\"}} "
           "{}\n",
           route, latency_buckets[i], h.buckets[i]);
    line("sluice_call_duration_seconds_bucket{{route=\"{}\",le=\"+Inf\"}} "
         "{}\n",
         route, h.count);
    line("sluice_call_duration_seconds_sum{{route=\"{}\"}} {}\n", route, h.sum);
    line("sluice_call_duration_seconds_count{{route=\"{}\"}} {}\n", route,
         h.count);
  }
  out += extra;
  return out;
}

} // namespace sluice
