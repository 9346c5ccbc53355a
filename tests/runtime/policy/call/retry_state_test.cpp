#include "sluice/runtime/policy/call/retry_state.hpp"

#include <chrono>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using namespace sluice::policy;
using sluice::duration;

namespace {

using action = next_step::action;

// No jitter: every backoff is base * 2^(fails - 1), capped.
call_policy chat() {
  call_policy p;
  p.max_attempts = 3;
  p.stall_window = 300s;
  p.backoff = {2s, 60s, 0.0};
  p.max_retry_after = 60s;
  return p;
}

struct call {
  call_policy pol = chat();
  retry_state rs;
  small_rng rng{1};

  next_step fail(outcome_kind k, std::optional<duration> hint = std::nullopt,
                 bool others_out = false, duration stalled = 0s,
                 size_t source = 0) {
    return rs.after_outcome(pol, source, k, hint, others_out, stalled, rng);
  }
};

} // namespace

TEST_CASE("retry_state: ok finishes and counts as progress") {
  call c;
  auto s = c.fail(outcome_kind::ok);
  CHECK(s.what == action::finish);
  CHECK(s.progressed);
  CHECK(c.rs.fails() == 0);
  CHECK_FALSE(c.rs.last_failed());
}

TEST_CASE("retry_state: permanent finishes at once, no retry, no progress") {
  call c;
  auto s = c.fail(outcome_kind::permanent);
  CHECK(s.what == action::finish);
  CHECK_FALSE(s.progressed);
  CHECK(c.rs.fails() == 0);
}

TEST_CASE("retry_state: transient failures back off 2 s, 4 s, then exhaust at max_attempts") {
  call c;
  auto s = c.fail(outcome_kind::transient, std::nullopt, false, 0s, 2);
  CHECK(s.what == action::back_off);
  CHECK(s.delay == 2s);
  CHECK_FALSE(s.stall_check_first);
  CHECK(c.rs.last_failed() == size_t{2});
  s = c.fail(outcome_kind::timeout, std::nullopt, false, 0s, 1);
  CHECK(s.what == action::back_off);
  CHECK(s.delay == 4s);
  CHECK(c.rs.last_failed() == size_t{1});
  s = c.fail(outcome_kind::transient);
  CHECK(s.what == action::exhausted);
  CHECK(std::string{s.reason} == "retry_exhausted");
  CHECK(s.retry_in == 8s); // the backoff it would have slept
  CHECK(c.rs.fails() == 3);
}

TEST_CASE("retry_state: a chat 429 spends no retry and backs off behind a stall check") {
  call c;
  for (int i = 0; i < 10; ++i) {
    auto s = c.fail(outcome_kind::rate_limited);
    REQUIRE(s.what == action::back_off);
    CHECK(s.stall_check_first);
  }
  CHECK(c.rs.fails() == 0);
  CHECK(c.rs.last_failed() == size_t{0});
}

TEST_CASE("retry_state: an embeddings 429 spends the retry budget") {
  call c;
  c.pol.rate_limit_spends_retry = true;
  c.fail(outcome_kind::rate_limited);
  c.fail(outcome_kind::rate_limited);
  auto s = c.fail(outcome_kind::rate_limited);
  CHECK(s.what == action::exhausted);
  CHECK(c.rs.fails() == 3);
}

TEST_CASE("retry_state: the backoff is never shorter than the upstream's hint") {
  call c;
  auto s = c.fail(outcome_kind::transient, 7s);
  CHECK(s.what == action::back_off);
  CHECK(s.delay == 7s);
}

TEST_CASE("retry_state: a hint past max_retry_after ends the call and passes it on") {
  call c;
  auto s = c.fail(outcome_kind::rate_limited, 61s);
  CHECK(s.what == action::exhausted);
  CHECK(std::string{s.reason} == "retry_after_too_long");
  CHECK(s.retry_in == 61s);
  // Equal to the bound is still slept out.
  call d;
  CHECK(d.fail(outcome_kind::rate_limited, 60s).what == action::back_off);
}

TEST_CASE("retry_state: a hint past the stall budget left ends the call") {
  call c;
  // 280 s stalled of 300: 20 s left.
  CHECK(c.fail(outcome_kind::rate_limited, 21s, false, 280s).what ==
        action::exhausted);
  call d;
  CHECK(d.fail(outcome_kind::rate_limited, 20s, false, 280s).what ==
        action::back_off);
}

TEST_CASE("retry_state: retry_exhausted wins over a too-long hint") {
  call c;
  c.pol.max_attempts = 1;
  auto s = c.fail(outcome_kind::transient, 100s);
  CHECK(std::string{s.reason} == "retry_exhausted");
}

TEST_CASE("retry_state: a hedge group waits for its last attempt and pools hints and 429s") {
  call c;
  auto s = c.fail(outcome_kind::rate_limited, 9s, true, 0s, 1);
  CHECK(s.what == action::wait_for_group);
  CHECK(c.rs.last_failed() == size_t{1});
  // The last of the group: a transient with a shorter hint.
  s = c.fail(outcome_kind::transient, 3s, false, 0s, 0);
  CHECK(s.what == action::back_off);
  CHECK(s.delay == 9s);          // the group's longest hint
  CHECK(s.stall_check_first);    // a 429 was among them
  CHECK(c.rs.fails() == 1);
  // The pool is emptied: the next failure stands alone.
  s = c.fail(outcome_kind::transient);
  CHECK(s.delay == 4s);
  CHECK_FALSE(s.stall_check_first);
}

TEST_CASE("retry_state: committed, any outcome is the streamed answer") {
  call c;
  c.rs.commit();
  auto s = c.fail(outcome_kind::transient);
  CHECK(s.what == action::finish_streamed);
  CHECK_FALSE(s.progressed);
  CHECK(c.rs.fails() == 0);
  s = c.fail(outcome_kind::ok);
  CHECK(s.what == action::finish_streamed);
  CHECK(s.progressed);
}

TEST_CASE("retry_state: the jitter is drawn only for a backoff") {
  call c;
  c.pol.backoff.jitter = 1.0;
  small_rng twin{1};
  c.fail(outcome_kind::ok);
  c.fail(outcome_kind::transient, std::nullopt, true); // waits for the group
  auto s = c.fail(outcome_kind::transient);
  auto expected = backoff_delay(c.pol.backoff, 2, twin.uniform());
  CHECK(s.delay == expected);
}

TEST_CASE("retry_state: one hedge predicate") {
  call c;
  CHECK_FALSE(c.rs.may_hedge(c.pol, true, true)); // no hedge_after
  c.pol.hedge_after = 1s;
  c.pol.max_hedged = 1;
  CHECK(c.rs.may_hedge(c.pol, true, true));
  CHECK_FALSE(c.rs.may_hedge(c.pol, false, true)); // not attempting
  CHECK_FALSE(c.rs.may_hedge(c.pol, true, false)); // its attempt is over
  c.rs.hedge_started();
  CHECK_FALSE(c.rs.may_hedge(c.pol, true, true)); // max_hedged reached
  c.pol.max_hedged = 2;
  CHECK(c.rs.may_hedge(c.pol, true, true));
  c.rs.commit();
  CHECK_FALSE(c.rs.may_hedge(c.pol, true, true)); // the stream began
}

TEST_CASE("retry_state: a retry needs the budget's slot, a first attempt or a hedge does not") {
  CHECK(retry_state::needs_retry_slot(true, true, false, false));
  CHECK_FALSE(retry_state::needs_retry_slot(false, true, false, false));
  CHECK_FALSE(retry_state::needs_retry_slot(true, false, false, false));
  CHECK_FALSE(retry_state::needs_retry_slot(true, true, true, false));
  CHECK_FALSE(retry_state::needs_retry_slot(true, true, false, true));
}

TEST_CASE("retry_state: a spent retry budget ends the call by setting or by its own stall") {
  using w = when_budget_spent;
  CHECK(retry_state::ends_when_budget_spent(w::fail, 0s, 300s));
  CHECK_FALSE(retry_state::ends_when_budget_spent(w::wait, 299s, 300s));
  CHECK(retry_state::ends_when_budget_spent(w::wait, 301s, 300s));
}

TEST_CASE("progress_interval: a hundredth of the window, at most 100 ms") {
  call_policy p;
  p.stall_window = 300s;
  CHECK(progress_interval(p) == 100ms);
  p.stall_window = 5s;
  CHECK(progress_interval(p) == 50ms);
}

TEST_CASE("retry_state: the group's longest hint wins, in any order") {
  call c;
  c.pol.max_attempts = 10;
  c.pol.backoff = {100ms, 1s, 0.0}; // shorter than any hint here
  c.fail(outcome_kind::transient, 5s, true);
  c.fail(outcome_kind::transient, 9s, true);
  c.fail(outcome_kind::transient, 2s, true);
  auto s = c.fail(outcome_kind::transient);
  REQUIRE(s.what == action::back_off);
  CHECK(s.delay == 9s);
  CHECK_FALSE(s.stall_check_first);
}

TEST_CASE("retry_state: a failure not safe to retry ends the call with its "
          "answer - a 429 is still retried") {
  for (auto k : {outcome_kind::transient, outcome_kind::timeout}) {
    call c;
    auto s = c.rs.after_outcome(c.pol, 0, k, std::nullopt, false, 0s, c.rng,
                                false);
    CHECK(s.what == action::finish);
    CHECK_FALSE(s.progressed);
    // The same failure, safe to retry, backs off.
    call d;
    CHECK(d.fail(k).what == action::back_off);
  }
  call c;
  auto s = c.rs.after_outcome(c.pol, 0, outcome_kind::rate_limited,
                              std::nullopt, false, 0s, c.rng, false);
  CHECK(s.what == action::back_off);
}
