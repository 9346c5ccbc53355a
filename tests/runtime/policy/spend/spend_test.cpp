// Money: a call's cost from a price table, and a budget over a calendar
// period with reservations (SPEC §12), in plain numbers.

#include "sluice/runtime/policy/spend/spend.hpp"

#include <chrono>
#include <cmath>

#include <catch2/catch.hpp>

#include "../policy_testing.hpp"

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::testing::refusal;
using sys = std::chrono::system_clock;

namespace {

sys::time_point utc(int y, unsigned m, unsigned d, int h = 0, int min = 0,
                    int s = 0) {
  // Days from civil, as the code under test does not (a plain loop).
  long long days = 0;
  for (int yy = 1970; yy < y; ++yy)
    days += (yy % 4 == 0 && (yy % 100 != 0 || yy % 400 == 0)) ? 366 : 365;
  static const int month_days[] = {31, 28, 31, 30, 31, 30,
                                   31, 31, 30, 31, 30, 31};
  bool leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  for (unsigned mm = 1; mm < m; ++mm)
    days += month_days[mm - 1] + (mm == 2 && leap ? 1 : 0);
  days += d - 1;
  return sys::time_point{
      std::chrono::seconds{days * 86400 + h * 3600 + min * 60 + s}};
}

} // namespace

TEST_CASE("spend: a call's cost at a price per million tokens, cached "
          "prompt tokens at their own rate, rounded up once") {
  model_price p{2.50, 10.00, 1.25}; // $ per 1M: input, output, cached
  // 1000 prompt (200 cached), 500 completion:
  // 800 x 2.5 + 200 x 1.25 + 500 x 10 = 7250 $/M-tokens -> $0.00725
  CHECK(cost_of({1000, 500, 200, false}, p) == to_money(0.00725));
  CHECK(dollars_text(cost_of({1000, 500, 200, false}, p)) == "0.00725");
  // A token at $0.0375 per million: 3.75 units, so one token costs 4.
  model_price cheap{0.0375, 0, 0};
  CHECK(cost_of({1, 0, 0, false}, cheap) == 4);
  CHECK(cost_of({4, 0, 0, false}, cheap) == 15);
  // More cached than prompt (a broken usage): the prompt is the bound.
  CHECK(cost_of({10, 0, 50, false}, p) == cost_of({10, 0, 10, false}, p));
  // A total never wraps (a hostile max_tokens of 2^64 - 1).
  CHECK(token_usage{8, UINT64_MAX, 0, true}.total() == UINT64_MAX);
  CHECK(token_usage{8, 10, 0, true}.total() == 18);
  // Free models cost nothing; huge counts saturate.
  CHECK(cost_of({1'000'000, 1'000'000, 0, false}, model_price{}) == 0);
  CHECK(cost_of({UINT64_MAX, UINT64_MAX, 0, false},
                model_price{1e6, 1e6, 1e6}) == money_saturation);
}

TEST_CASE("spend: money as dollars text, and prices refused with their "
          "field") {
  CHECK(dollars_text(0) == "0");
  CHECK(dollars_text(money_per_dollar * 12 + money_per_dollar / 2) == "12.5");
  CHECK(dollars_text(1) == "0.00000001");
  CHECK(to_money(-1) == 0);
  CHECK(to_money(NAN) == 0);
  CHECK(refusal(model_price{1, 2, 0.5}).empty());
  CHECK(refusal(model_price{-1, 2, 0}).rfind("input:", 0) == 0);
  CHECK(refusal(model_price{1, NAN, 0}).rfind("output:", 0) == 0);
  CHECK(refusal(model_price{1, 1, 2e6}).rfind("cached_input:", 0) == 0);
}

TEST_CASE("spend: days and months end at midnight UTC, across a leap year "
          "and a year's end") {
  CHECK(period_end(budget_period::day, utc(2026, 12, 5, 7)) ==
        utc(2026, 12, 6));
  CHECK(period_end(budget_period::day, utc(2026, 12, 5)) == utc(2026, 12, 6));
  CHECK(period_end(budget_period::day, utc(2026, 12, 5, 23, 59, 59)) ==
        utc(2026, 12, 6));
  CHECK(period_end(budget_period::month, utc(2026, 12, 5, 7)) ==
        utc(2027, 1, 1));
  CHECK(period_end(budget_period::month, utc(2028, 2, 29, 12)) ==
        utc(2028, 3, 1));
  CHECK(period_end(budget_period::month, utc(2027, 1, 31, 23, 59, 59)) ==
        utc(2027, 2, 1));
}

TEST_CASE("spend budget: reservations fit the budget with what was spent, "
          "the period's end starts it again") {
  spend_budget b{to_money(1.00), budget_period::day};
  auto now = utc(2026, 12, 5, 7);
  auto g = b.reserve(to_money(0.60), now);
  CHECK(g.ok);
  CHECK(g.remaining == to_money(0.40));
  CHECK(g.resets_at == utc(2026, 12, 6));
  CHECK_FALSE(b.reserve(to_money(0.50), now).ok);
  b.settle(to_money(0.60), to_money(0.70), now + 1s); // cost more
  CHECK(b.spent(now + 1s) == to_money(0.70));
  g = b.reserve(to_money(0.31), now + 2s);
  CHECK_FALSE(g.ok);
  CHECK(g.remaining == to_money(0.30));
  CHECK(b.reserve(to_money(0.30), now + 2s).ok);
  b.settle(to_money(0.30), to_money(0.30), now + 3s);
  CHECK(b.spent(now + 3s) == to_money(1.00));
  CHECK_FALSE(b.reserve(1, now + 4s).ok);
  // Midnight UTC: whole again.
  CHECK(b.spent(utc(2026, 12, 6)) == 0);
  CHECK(b.reserve(to_money(1.00), utc(2026, 12, 6)).ok);
}

TEST_CASE("spend budget: passed only by what calls in flight cost beyond "
          "their estimates, and a budget of 0 is refused") {
  spend_budget b{to_money(10), budget_period::month};
  auto now = utc(2026, 12, 5);
  int granted = 0;
  while (b.reserve(to_money(1), now).ok)
    ++granted;
  CHECK(granted == 10);
  for (int i = 0; i < granted; ++i)
    b.settle(to_money(1), to_money(1.5), now + 1s); // each 50 cents more
  CHECK(b.spent(now + 1s) == to_money(15));
  CHECK(b.in_flight() == 0);
  CHECK_FALSE(b.reserve(1, now + 1s).ok);
  CHECK_THROWS_WITH((spend_budget{0, budget_period::day}),
                    Catch::StartsWith("limit:"));
}

TEST_CASE("spend budget: a new limit keeps what was spent") {
  spend_budget b{to_money(10), budget_period::day};
  auto now = utc(2026, 12, 5, 12);
  REQUIRE(b.reserve(to_money(4), now).ok);
  b.settle(to_money(4), to_money(4), now);
  b.set_limit(to_money(5));
  CHECK(b.spent(now) == to_money(4));
  CHECK(b.reserve(to_money(1), now).ok);
  CHECK_FALSE(b.reserve(1, now).ok);
  CHECK_THROWS_WITH(b.set_limit(0), Catch::StartsWith("limit:"));
}
