#pragma once

// What calls use and cost, against the limits the node sets (SPEC §12): a
// client key's and a route's tokens per minute and per day and budgets per
// day and per month. A call reserves its estimate in every scope it is
// under before it is sent, and settles with what it used when it ends,
// whatever the end (a hold not settled gives its reservation back when
// dropped). In this process; thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sluice/runtime/config/file_config.hpp"
#include "sluice/runtime/policy/model_match.hpp"
#include "sluice/runtime/policy/spend/limit_headers.hpp"
#include "sluice/runtime/policy/spend/spend.hpp"
#include "sluice/runtime/policy/spend/token_window.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/redis/shared_limits.hpp"

namespace sluice::node {

using wall_time = std::chrono::system_clock::time_point;

/// One scope's limits and what is counted against them.
class spend_scope {
public:
  /// `earlier`: the same scope before a config reload; what it counted
  /// goes on under the new limits.
  spend_scope(std::string name, const spend_settings& settings,
              const spend_scope* earlier = nullptr);

  const std::string& name() const noexcept { return name_; }
  const spend_settings& settings() const noexcept { return settings_; }

  /// The scope of `model`'s calls within this one (`model_limits`): the
  /// most specific pattern it matches, as a route's models are matched --
  /// its name, else the glob with the most literal bytes; null when none
  /// does.
  std::shared_ptr<spend_scope> for_model(const std::string& model) const;

  /// Pattern -> scope, for /status.
  const std::vector<std::pair<std::string, std::shared_ptr<spend_scope>>>&
  models() const noexcept {
    return models_;
  }

  /// Why a reservation was refused.
  enum class refused { none, tokens, too_large, quota };

  struct verdict {
    refused why = refused::none;
    /// Which limit: "tokens_per_minute", "budget_usd_per_day", ...
    const char* limit = "";
    /// Its size (tokens; or dollars, for a budget).
    double limit_value = 0;
    /// When to come back: until enough tokens leave the window (zero:
    /// only calls in flight stand in the way), or the budget's period end.
    duration retry_after = duration::zero();
  };

  /// Reserves `tokens` in each token limit and `cost` in each budget, all
  /// or none.
  verdict reserve(uint64_t tokens, policy::money cost, time_point now,
                  wall_time wall);

  /// A call that reserved `tokens` and `cost` ends having used `used` and
  /// cost `spent`.
  void settle(uint64_t tokens, uint64_t used, policy::money cost,
              policy::money spent, time_point now, wall_time wall);

  /// The token limit with the least left now (for the x-ratelimit-*
  /// headers); none without token limits.
  std::optional<policy::limit_state::lane> token_lane(time_point now) const;

  /// The scope's limits as the nodes share them in Redis, each named
  /// "key:NAME:LIMIT" or "route:PATH:LIMIT" (LIMIT as in `verdict`), with
  /// `tokens` or `cost` as its amount.
  std::vector<shared_limit> shared(uint64_t tokens, policy::money cost) const;

  /// Redis's refusal by `l` (one of `shared`'s) as this scope's verdict.
  verdict shared_refusal(const shared_limit& l, const shared_limits::outcome& o,
                         wall_time wall) const;

  /// For /status.
  struct figures {
    uint64_t tokens_minute = 0;
    uint64_t tokens_day = 0;
    uint64_t tokens_in_flight = 0;
    policy::money spent_day = 0;
    policy::money spent_month = 0;
  };
  figures read(time_point now, wall_time wall) const;

private:
  std::string name_;
  spend_settings settings_;
  std::vector<std::pair<std::string, std::shared_ptr<spend_scope>>> models_;
  /// Which of `models_` a model falls under (the routes' rule).
  policy::model_rules model_rules_;
  mutable std::mutex mx_;
  mutable std::optional<policy::token_window> minute_;
  mutable std::optional<policy::token_window> day_;
  mutable std::optional<policy::spend_budget> daily_;
  mutable std::optional<policy::spend_budget> monthly_;
};

/// What one call reserved, in every scope it is under. Settled once;
/// dropped unsettled, it gives the reservations back (nothing used).
class spend_hold {
public:
  spend_hold() = default;
  spend_hold(const spend_hold&) = delete;
  spend_hold& operator=(const spend_hold&) = delete;
  spend_hold(spend_hold&&) noexcept = default;
  spend_hold& operator=(spend_hold&&) noexcept;
  ~spend_hold();

  /// The scopes, the reserved tokens and cost, and how to read the time.
  void hold(std::vector<std::shared_ptr<spend_scope>> scopes, uint64_t tokens,
            policy::money cost);

  bool active() const noexcept { return !scopes_.empty(); }

  void settle(uint64_t used, policy::money spent, time_point now,
              wall_time wall);

private:
  std::vector<std::shared_ptr<spend_scope>> scopes_;
  uint64_t tokens_ = 0;
  policy::money cost_ = 0;
};

/// The node's spend rules: each route's scope and the price table. Built
/// again by a config reload, each route's scope carried over.
class spend_book {
public:
  spend_book(const spend_rules& rules, const spend_book* earlier = nullptr);

  /// The route's scope, or null when it sets no limit.
  std::shared_ptr<spend_scope> route(const std::string& path) const;

  /// The price of `model`, or null.
  const policy::model_price* price(const std::string& model) const;

  uint64_t default_max_tokens() const noexcept { return default_max_tokens_; }

  const std::map<std::string, std::shared_ptr<spend_scope>>&
  routes() const noexcept {
    return routes_;
  }

private:
  std::map<std::string, std::shared_ptr<spend_scope>> routes_;
  std::map<std::string, policy::model_price> prices_;
  uint64_t default_max_tokens_;
};

} // namespace sluice::node
