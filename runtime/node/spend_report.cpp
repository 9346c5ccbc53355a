// Tokens and spend on /status and /metrics (SPEC §12).

#include "sluice/runtime/node/spend_report.hpp"

#include <vector>

namespace sluice::node {

using json = nlohmann::json;

// A key's or a route's tokens and spend against its limits (SPEC §12).
json spend_json(const spend_scope& scope, time_point now, wall_time wall,
                const shared_counts* shared) {
  auto& s = scope.settings();
  auto f = scope.read(now, wall);
  bool from_redis = false;
  if (shared != nullptr) {
    // Redis's counts instead of this node's, limit by limit.
    f.tokens_in_flight = 0;
    for (auto& l : scope.shared(0, 0)) {
      auto i = shared->find(l.name);
      if (i == shared->end())
        continue;
      from_redis = true;
      auto& c = i->second;
      switch (l.type) {
      case shared_limit::kind::window:
        (l.period < std::chrono::hours{1} ? f.tokens_minute : f.tokens_day) =
            c.used;
        f.tokens_in_flight = std::max(f.tokens_in_flight, c.in_flight);
        break;
      case shared_limit::kind::day:
        f.spent_day = c.used;
        break;
      case shared_limit::kind::month:
        f.spent_month = c.used;
        break;
      }
    }
  }
  auto usd = policy::to_dollars;
  json j = {{"tokens_in_flight", f.tokens_in_flight}};
  if (s.tokens_per_minute != 0)
    j["tokens_per_minute"] = {{"limit", s.tokens_per_minute},
                              {"used", f.tokens_minute}};
  if (s.tokens_per_day != 0)
    j["tokens_per_day"] = {{"limit", s.tokens_per_day}, {"used", f.tokens_day}};
  if (s.budget_usd_per_day != 0)
    j["budget_usd_per_day"] = {
        {"limit", s.budget_usd_per_day},
        {"spent", usd(f.spent_day)},
        {"left", std::max(0.0, s.budget_usd_per_day - usd(f.spent_day))}};
  if (s.budget_usd_per_month != 0)
    j["budget_usd_per_month"] = {
        {"limit", s.budget_usd_per_month},
        {"spent", usd(f.spent_month)},
        {"left", std::max(0.0, s.budget_usd_per_month - usd(f.spent_month))}};
  if (from_redis)
    j["counted_in"] = "redis";
  for (auto& [pattern, sub] : scope.models())
    j["models"][pattern] = spend_json(*sub, now, wall, shared);
  return j;
}

std::vector<shared_limit> shared_limits_of(front_state& front) {
  std::vector<shared_limit> out;
  std::function<void(const spend_scope&)> add = [&](const spend_scope& s) {
    for (auto& l : s.shared(0, 0))
      if (out.size() < shared_spend::max_read_limits)
        out.push_back(std::move(l));
    for (auto& m : s.models())
      add(*m.second);
  };
  auto keys = front.keys();
  for (auto& k : keys->all())
    if (k->spend())
      add(*k->spend());
  auto book = front.spend();
  for (auto& r : book->routes())
    add(*r.second);
  return out;
}

// Every key's and route's limits (SPEC §12), with their model scopes, as
// gauges: the limit, what was used or spent, what is left. Tokens in
// tokens, budgets in dollars; this node's count (see /status `spend`).
void write_spend_gauges(prom_text& out, front_state& front) {
  std::vector<const spend_scope*> scopes;
  auto add = [&](const spend_scope* s) {
    scopes.push_back(s);
    for (auto& m : s->models())
      scopes.push_back(m.second.get());
  };
  auto keys = front.keys();
  for (auto& k : keys->all())
    if (k->spend())
      add(k->spend().get());
  auto book = front.spend();
  for (auto& r : book->routes())
    add(r.second.get());
  struct row {
    std::string scope;
    const char* limit;
    double size, used;
  };
  std::vector<row> rows;
  auto now = front.now();
  auto wall = std::chrono::system_clock::now();
  for (auto* s : scopes) {
    auto& c = s->settings();
    auto f = s->read(now, wall);
    auto push = [&](const char* limit, double size, double used) {
      if (size > 0)
        rows.push_back({s->name(), limit, size, used});
    };
    push("tokens_per_minute", static_cast<double>(c.tokens_per_minute),
         static_cast<double>(f.tokens_minute));
    push("tokens_per_day", static_cast<double>(c.tokens_per_day),
         static_cast<double>(f.tokens_day));
    push("budget_usd_per_day", c.budget_usd_per_day,
         policy::to_dollars(f.spent_day));
    push("budget_usd_per_month", c.budget_usd_per_month,
         policy::to_dollars(f.spent_month));
  }
  struct family {
    const char* name;
    const char* help;
    double (*value)(const row&);
  };
  const family families[] = {
      {"sluice_spend_limit",
       "A key's or route's token limit (tokens) or budget (dollars).",
       [](const row& r) { return r.size; }},
      {"sluice_spend_used",
       "Tokens used in the limit's window, or dollars spent in the budget's "
       "period.",
       [](const row& r) { return r.used; }},
      {"sluice_spend_left", "What is left of the limit or budget now.",
       [](const row& r) { return std::max(0.0, r.size - r.used); }}};
  for (auto& fam : families) {
    out.family(fam.name, "gauge", fam.help);
    for (auto& r : rows)
      out.sample(fam.name, {{"scope", r.scope}, {"limit", r.limit}},
                 fam.value(r));
  }
}

} // namespace sluice::node
