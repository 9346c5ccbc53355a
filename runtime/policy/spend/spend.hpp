#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sluice::policy {

/// Money, in millionths of a cent (10^-8 dollars): integer, so sums over a
/// month are exact, and fine enough for prices per million tokens to the
/// hundredth of a cent (a token at $0.0375 per million is 3.75 of these:
/// a call's cost is computed per million, then rounded up once).
using money = uint64_t;

/// Money units in one dollar.
constexpr money money_per_dollar = 100'000'000;

/// The most a price, a budget or a sum may be ($10^9): settings above are
/// refused, sums saturate here.
constexpr money money_saturation = money_per_dollar * 1'000'000'000;

/// A model's price per million tokens, in dollars (OpenAI's price sheets'
/// unit): prompt tokens, completion tokens, and prompt tokens served from
/// the provider's cache (counted within the prompt tokens, priced at this
/// rate instead of `input`).
struct model_price {
  double input_per_m = 0;
  double output_per_m = 0;
  double cached_input_per_m = 0;
};

/// Throws `field_error` naming `input`, `output` or `cached_input` for a
/// price that is negative, not a number or above $10^6 per million tokens.
void validate(const model_price& price);

/// The tokens of one call: as the upstream's `usage` said, or estimated.
struct token_usage {
  uint64_t prompt = 0;
  uint64_t completion = 0;
  /// Of `prompt`, those served from the provider's cache.
  uint64_t cached_prompt = 0;
  /// Counted by the gateway's estimate, not said by the upstream.
  bool estimated = false;

  /// Prompt and completion tokens, saturating at 2^64 - 1.
  uint64_t total() const noexcept;
};

/// What `usage` costs at `price`, rounded up to a whole money unit.
/// Cached tokens beyond the prompt count as prompt tokens. Saturates at
/// `money_saturation`.
money cost_of(const token_usage& usage, const model_price& price) noexcept;

/// Dollars to money, rounded to the nearest unit (a setting: validated).
money to_money(double dollars) noexcept;

/// Money as dollars (for JSON numbers and Prometheus samples).
constexpr double to_dollars(money m) noexcept {
  return static_cast<double>(m) / money_per_dollar;
}

/// Money as dollars with up to 8 decimals, for headers, /status and logs
/// ("0.00012", "12.5", "0").
std::string dollars_text(money m);

/// The calendar periods a budget runs over, in UTC.
enum class budget_period { day, month };

/// The instant the period holding `t` ends (the next midnight UTC, or the
/// first of the next month at midnight UTC).
std::chrono::system_clock::time_point
period_end(budget_period p, std::chrono::system_clock::time_point t) noexcept;

/// A budget in money over a calendar period (SPEC §12): a call reserves
/// its estimated cost before it is sent and settles with its real cost when
/// it ends. A reservation is granted only if what was spent in the period,
/// what is reserved by calls in flight and the new estimate fit the
/// budget, so the budget is passed only by what calls in flight cost beyond
/// their estimates. At the period's end what was spent starts again from
/// zero; reservations in flight stay. Pure: takes `now`; one owner.
class spend_budget {
public:
  struct grant {
    bool ok = false;
    /// What is left now (after this reservation if granted).
    money remaining = 0;
    /// When the period ends (and the budget is whole again).
    std::chrono::system_clock::time_point resets_at{};
  };

  /// `limit` > 0.
  spend_budget(money limit, budget_period period);

  /// A new limit (a config reload): what was spent and reserved stays
  /// counted against it. Same rule as the constructor's.
  void set_limit(money limit);

  grant reserve(money estimate, std::chrono::system_clock::time_point now);
  void settle(money reserved, money cost,
              std::chrono::system_clock::time_point now);

  money spent(std::chrono::system_clock::time_point now) noexcept;
  money in_flight() const noexcept { return in_flight_; }
  money limit() const noexcept { return limit_; }
  budget_period period() const noexcept { return period_; }

private:
  void roll(std::chrono::system_clock::time_point now) noexcept;

  money limit_;
  budget_period period_;
  money spent_ = 0;
  money in_flight_ = 0;
  /// The end of the period `spent_` belongs to (zero: none yet).
  std::chrono::system_clock::time_point ends_{};
};

} // namespace sluice::policy
