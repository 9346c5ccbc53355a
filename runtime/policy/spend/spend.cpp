#include "sluice/runtime/policy/spend/spend.hpp"

#include <algorithm>
#include <cmath>

#include "sluice/runtime/policy/civil_days.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::policy {

namespace {

using sys_clock = std::chrono::system_clock;

/// The highest price per million tokens a setting may give, in dollars.
constexpr double max_price_per_m = 1e6;

void check_price(const char* field, double v) {
  if (!std::isfinite(v) || v < 0)
    throw field_error(field, "must be a price of 0 or more dollars per "
                             "million tokens");
  if (v > max_price_per_m)
    throw field_error(field, "must be at most 1000000 dollars per million "
                             "tokens");
}

money saturate(unsigned __int128 v) noexcept {
  return v > money_saturation ? money_saturation : static_cast<money>(v);
}

money add(money a, money b) noexcept {
  return saturate(static_cast<unsigned __int128>(a) + b);
}

// Money per million tokens: what a price setting is in money units.
unsigned __int128 per_million(double dollars_per_m) noexcept {
  return to_money(dollars_per_m);
}

} // namespace

void validate(const model_price& price) {
  check_price("input", price.input_per_m);
  check_price("output", price.output_per_m);
  check_price("cached_input", price.cached_input_per_m);
}

uint64_t token_usage::total() const noexcept {
  // Saturating: a request's max_tokens of 2^64 - 1 must not wrap to a
  // small reservation.
  return prompt > UINT64_MAX - completion ? UINT64_MAX : prompt + completion;
}

money to_money(double dollars) noexcept {
  if (!std::isfinite(dollars) || dollars <= 0)
    return 0;
  long double units =
      std::nearbyint(static_cast<long double>(dollars) * money_per_dollar);
  return units >= static_cast<long double>(money_saturation)
             ? money_saturation
             : static_cast<money>(units);
}

money cost_of(const token_usage& usage, const model_price& price) noexcept {
  const uint64_t cached = std::min(usage.cached_prompt, usage.prompt);
  const uint64_t fresh = usage.prompt - cached;
  unsigned __int128 sum = 0;
  sum += static_cast<unsigned __int128>(fresh) * per_million(price.input_per_m);
  sum += static_cast<unsigned __int128>(cached) *
         per_million(price.cached_input_per_m);
  sum += static_cast<unsigned __int128>(usage.completion) *
         per_million(price.output_per_m);
  // Per million tokens, rounded up: a call never costs less than it did.
  return saturate((sum + 999'999) / 1'000'000);
}

std::string dollars_text(money m) {
  std::string out = std::to_string(m / money_per_dollar);
  money frac = m % money_per_dollar;
  if (frac == 0)
    return out;
  std::string digits = std::to_string(frac);
  digits.insert(0, 8 - digits.size(), '0');
  while (!digits.empty() && digits.back() == '0')
    digits.pop_back();
  return out + "." + digits;
}

sys_clock::time_point period_end(budget_period p,
                                 sys_clock::time_point t) noexcept {
  using days = std::chrono::duration<long long, std::ratio<86400>>;
  auto since =
      std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch());
  long long day = since.count() / 86400;
  if (since.count() < 0 && since.count() % 86400 != 0)
    --day; // floor, for instants before 1970
  long long next;
  if (p == budget_period::day) {
    next = day + 1;
  } else {
    long long y;
    unsigned m, d;
    civil_from_days(day, y, m, d);
    next =
        m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, m + 1, 1);
  }
  return sys_clock::time_point{
      std::chrono::duration_cast<sys_clock::duration>(days{next})};
}

spend_budget::spend_budget(money limit, budget_period period)
    : period_(period) {
  set_limit(limit);
}

void spend_budget::set_limit(money limit) {
  if (limit == 0)
    throw field_error("limit", "must be more than 0 dollars");
  if (limit > money_saturation)
    throw field_error("limit", "must be at most 1000000000 dollars");
  limit_ = limit;
}

void spend_budget::roll(sys_clock::time_point now) noexcept {
  if (ends_ == sys_clock::time_point{} || now >= ends_) {
    if (ends_ != sys_clock::time_point{})
      spent_ = 0;
    ends_ = period_end(period_, now);
  }
}

money spend_budget::spent(sys_clock::time_point now) noexcept {
  roll(now);
  return spent_;
}

spend_budget::grant spend_budget::reserve(money estimate,
                                          sys_clock::time_point now) {
  roll(now);
  grant g;
  g.resets_at = ends_;
  auto taken = add(add(spent_, in_flight_), estimate);
  if (taken <= limit_) {
    in_flight_ = add(in_flight_, estimate);
    g.ok = true;
    g.remaining = limit_ - taken;
    return g;
  }
  auto before = add(spent_, in_flight_);
  g.remaining = before >= limit_ ? 0 : limit_ - before;
  return g;
}

void spend_budget::settle(money reserved, money cost,
                          sys_clock::time_point now) {
  roll(now);
  in_flight_ -= std::min(reserved, in_flight_);
  spent_ = add(spent_, cost);
}

} // namespace sluice::policy
