// What calls use and cost (SPEC §12): a key's or a route's token limits
// and budgets, and `[prices]`.

#include <algorithm>
#include <cmath>

#include "sluice/runtime/config/sections.hpp"

namespace sluice::config {

namespace {

/// The largest token limit (what the shared ledger in Redis can count).
constexpr int64_t max_token_limit = 1'000'000'000'000;

/// The largest budget, in dollars.
constexpr double max_budget_usd = 1e9;

/// The longest model pattern, and the most `model_limits` of one scope
/// (each call looks through them).
constexpr size_t max_model_pattern_bytes = 256;
constexpr size_t max_model_limits = 64;

} // namespace

void read_spend(table_reader& r, spend_settings& s) {
  auto tokens = [&](std::string_view key, uint64_t& out) {
    auto x = r.integer(key);
    if (!x)
      return;
    if (*x < 1 || *x > max_token_limit)
      r.fail(key,
             "must be an integer in [1, 1000000000000] (leave it out for no "
             "limit)",
             r.get(key));
    out = static_cast<uint64_t>(*x);
  };
  auto dollars = [&](std::string_view key, double& out) {
    auto x = r.number(key);
    if (!x)
      return;
    if (!std::isfinite(*x) || *x <= 0 || *x > max_budget_usd)
      r.fail(key,
             "must be more than 0 and at most 1000000000 dollars (leave it "
             "out for no budget)",
             r.get(key));
    out = *x;
  };
  tokens("tokens_per_minute", s.tokens_per_minute);
  tokens("tokens_per_day", s.tokens_per_day);
  dollars("budget_usd_per_day", s.budget_usd_per_day);
  dollars("budget_usd_per_month", s.budget_usd_per_month);
}

void read_spend_with_models(table_reader& r, spend_settings& s) {
  read_spend(r, s);
  auto* t = r.table("model_limits");
  if (t == nullptr)
    return;
  table_reader models{*t, r.prefix() + ".model_limits"};
  for (auto&& [k, v] : *t) {
    std::string pattern{k.str()};
    bool fits = !pattern.empty() && pattern.size() <= max_model_pattern_bytes &&
                std::none_of(pattern.begin(), pattern.end(), [](char c) {
                  auto u = static_cast<unsigned char>(c);
                  return u < 0x20 || u == 0x7f;
                });
    if (!fits)
      models.fail(pattern,
                  "a model name or glob is 1 to 256 bytes, no control "
                  "characters",
                  &v);
    if (s.models.size() >= max_model_limits)
      models.fail(pattern, "at most 64 model_limits per key or route", &v);
    auto* mt = models.table(pattern);
    table_reader mr{*mt, models.prefix() + ".\"" + pattern + "\""};
    model_spend m;
    m.pattern = pattern;
    m.line = mr.line();
    read_spend(mr, m.spend);
    if (!m.spend.any())
      mr.fail("tokens_per_minute",
              "a model's limits table sets no limit (tokens_per_minute, "
              "tokens_per_day, budget_usd_per_day or budget_usd_per_month)");
    mr.done();
    s.models.push_back(std::move(m));
  }
  models.done();
}

void read_prices(table_reader& prices, const toml::table& t,
                 std::map<std::string, policy::model_price>& out) {
  for (auto&& [k, v] : t) {
    std::string model{k.str()};
    if (model.empty() || model.size() > 256)
      prices.fail(model, "a model name is 1 to 256 bytes", &v);
    auto* pt = prices.table(model);
    table_reader r{*pt, prices.prefix() + ".\"" + model + "\""};
    policy::model_price p;
    if (r.get("input") == nullptr || r.get("output") == nullptr)
      r.fail(r.get("input") == nullptr ? "input" : "output",
             "is required: dollars per million tokens");
    p.input_per_m = *r.number("input");
    p.output_per_m = *r.number("output");
    // Cached prompt tokens: at the input price unless given.
    p.cached_input_per_m = r.number("cached_input").value_or(p.input_per_m);
    r.checked([&] { policy::validate(p); });
    r.done();
    out[model] = p;
  }
  prices.done();
}

} // namespace sluice::config
