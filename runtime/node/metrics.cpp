#include "sluice/runtime/node/metrics.hpp"

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
  // A hedged attempt cancelled because another won is no outcome of its
  // source's: counted apart, never as an error.
  for (auto& a : r.attempts)
    ++attempts_[{a.source, a.cancelled
                               ? std::string{"cancelled"}
                               : std::string{policy::to_string(a.kind)}}];
  latency_[route].add(latency_buckets, secs);
  call_figures f;
  f.status = r.status == call_status::all_sources_exhausted && !r.reason.empty()
                 ? r.reason
                 : std::string{to_string(r.status)};
  f.attempts = static_cast<uint32_t>(r.attempts.size());
  f.elapsed = elapsed;
  f.stalled = r.stalled;
  f.productive = r.productive;
  f.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  auto& ring = recent_[route];
  if (ring.calls.size() < recent_calls_per_route)
    ring.calls.push_back(std::move(f));
  else
    ring.calls[ring.next] = std::move(f);
  ring.next = (ring.next + 1) % recent_calls_per_route;
  if (!r.attempts.empty()) {
    auto upstream = r.upstream_time();
    auto overhead = std::max(elapsed - upstream, duration::zero());
    overhead_.add(overhead_buckets,
                  std::chrono::duration<double>(overhead).count());
  }
}

node_metrics::figures node_metrics::read(size_t n) const {
  figures out;
  {
    // Copies only: calls finishing wait on this lock.
    std::lock_guard<std::mutex> guard{mx_};
    for (auto& [k, count] : attempts_)
      out.attempts[k.first][k.second] = count;
    out.overhead_counts = overhead_.buckets;
    out.overhead_count = overhead_.count;
    out.overhead_sum = overhead_.sum;
    for (auto& [route, ring] : recent_)
      out.slowest[route] = ring.calls;
  }
  for (auto& [route, calls] : out.slowest) {
    auto k = std::min(n, calls.size());
    std::partial_sort(calls.begin(), calls.begin() + k, calls.end(),
                      [](const call_figures& a, const call_figures& b) {
                        return a.elapsed > b.elapsed;
                      });
    calls.resize(k);
  }
  return out;
}

void node_metrics::histogram::add(const std::array<double, 15>& bounds,
                                  double secs) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (secs <= bounds[i])
      ++buckets[i];
  ++count;
  sum += secs;
}

void prom_text::family(std::string_view name, std::string_view type,
                       std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

namespace {

// `{a="x",b="y"` without the closing brace (a bucket adds its `le`).
void open_labels(std::string& out, prom_text::labels ls) {
  out += '{';
  auto sep = "";
  for (auto& [k, v] : ls) {
    out += fmt::format("{}{}=\"{}\"", sep, k, prom_label(v));
    sep = ",";
  }
}

} // namespace

void prom_text::sample_text(std::string_view name, labels ls,
                            std::string_view value) {
  out_ += name;
  if (ls.size() > 0) {
    open_labels(out_, ls);
    out_ += '}';
  }
  out_ += fmt::format(" {}\n", value);
}

void prom_text::bucket(std::string_view name, labels ls, std::string_view le,
                       uint64_t n) {
  out_ += fmt::format("{}_bucket", name);
  open_labels(out_, ls);
  out_ += fmt::format("{}le=\"{}\"}} {}\n", ls.size() > 0 ? "," : "", le, n);
}

void node_metrics::record_usage(const std::string& key,
                                const std::string& model,
                                const std::string& source,
                                const policy::token_usage& u,
                                std::optional<policy::money> cost) {
  auto sat = [](uint64_t& sum, uint64_t add) {
    sum = add > UINT64_MAX - sum ? UINT64_MAX : sum + add;
  };
  std::lock_guard<std::mutex> guard{mx_};
  auto series = std::make_tuple(key.empty() ? "anonymous" : key, model,
                                source.empty() ? "none" : source);
  auto i = usage_.find(series);
  if (i == usage_.end()) {
    if (usage_.size() >= max_usage_series)
      std::get<1>(series) = "other";
    i = usage_.try_emplace(std::move(series)).first;
  }
  auto& s = i->second;
  sat(s.prompt, u.prompt);
  sat(s.completion, u.completion);
  sat(s.cached, u.cached_prompt);
  s.estimated += u.estimated ? 1 : 0;
  if (cost) {
    s.priced = true;
    sat(s.cost, *cost);
  }
}

void node_metrics::record_mcp(const std::string& server,
                              const std::string& method,
                              const std::string& name,
                              const std::string& outcome) {
  std::lock_guard<std::mutex> guard{mx_};
  auto series = std::make_tuple(server, method, name);
  auto i = mcp_.find(series);
  if (i == mcp_.end()) {
    if (mcp_.size() >= max_mcp_series)
      std::get<2>(series) = "other";
    i = mcp_.try_emplace(std::move(series)).first;
  }
  ++i->second[outcome];
}

void node_metrics::write(prom_text& out) const {
  std::lock_guard<std::mutex> guard{mx_};
  out.family("sluice_calls_total", "counter",
             "Calls finished, by route and outcome.");
  for (auto& [k, n] : calls_)
    out.sample("sluice_calls_total",
               {{"route", k.first}, {"outcome", k.second}}, n);
  out.family("sluice_admission_rejections_total", "counter",
             "tool_busy rejections, by the tier waited on.");
  for (auto& [tier, n] : rejections_by_tier_)
    out.sample("sluice_admission_rejections_total", {{"tier", tier}}, n);
  out.family("sluice_verdicts_total", "counter",
             "all_sources_exhausted verdicts, by reason.");
  for (auto& [reason, n] : verdicts_)
    out.sample("sluice_verdicts_total", {{"reason", reason}}, n);
  out.family("sluice_attempts_total", "counter",
             "Attempts, by source and outcome.");
  for (auto& [k, n] : attempts_)
    out.sample("sluice_attempts_total",
               {{"source", k.first}, {"outcome", k.second}}, n);
  out.family("sluice_call_duration_seconds", "histogram",
             "Call latency, by route.");
  for (auto& [name, h] : latency_)
    out.histogram("sluice_call_duration_seconds", {{"route", name}},
                  latency_buckets, h.buckets, h.count, h.sum);
  out.family("sluice_gateway_overhead_seconds", "histogram",
             "A call's time minus its attempts' time at upstreams (calls "
             "that made attempts).");
  out.histogram("sluice_gateway_overhead_seconds", {}, overhead_buckets,
                overhead_.buckets, overhead_.count, overhead_.sum);
  out.family("sluice_tokens_total", "counter",
             "Tokens calls used, as their answers said or as estimated, by "
             "client key, model, answering source and type (prompt, "
             "completion, cached: prompt tokens from the provider's cache).");
  for (auto& [k, s] : usage_) {
    auto& [key, model, source] = k;
    std::pair<const char*, uint64_t> types[] = {{"prompt", s.prompt},
                                                {"completion", s.completion},
                                                {"cached", s.cached}};
    for (auto& [type, n] : types)
      out.sample(
          "sluice_tokens_total",
          {{"key", key}, {"model", model}, {"source", source}, {"type", type}},
          n);
  }
  out.family("sluice_usage_estimated_total", "counter",
             "Calls whose answer said no usage (counted by the estimate).");
  for (auto& [k, s] : usage_) {
    auto& [key, model, source] = k;
    out.sample("sluice_usage_estimated_total",
               {{"key", key}, {"model", model}, {"source", source}},
               s.estimated);
  }
  if (!mcp_.empty()) {
    out.family("sluice_mcp_calls_total", "counter",
               "MCP calls through the gateway, by server, method, tool (or "
               "prompt, or resource URI) and outcome.");
    for (auto& [k, outcomes] : mcp_) {
      auto& [server, method, name] = k;
      for (auto& [outcome, n] : outcomes)
        out.sample("sluice_mcp_calls_total",
                   {{"server", server},
                    {"method", method},
                    {"name", name},
                    {"outcome", outcome}},
                   n);
    }
  }
  out.family("sluice_cost_usd_total", "counter",
             "What calls cost at [prices], in dollars, by client key, model "
             "and answering source (priced models only).");
  for (auto& [k, s] : usage_) {
    if (!s.priced)
      continue;
    auto& [key, model, source] = k;
    out.sample_text("sluice_cost_usd_total",
                    {{"key", key}, {"model", model}, {"source", source}},
                    fmt::format("{:.8f}", policy::to_dollars(s.cost)));
  }
}

} // namespace sluice
