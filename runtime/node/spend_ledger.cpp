#include "sluice/runtime/node/spend_ledger.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::node {

namespace {

using namespace std::chrono_literals;

constexpr duration minute = 60s;
constexpr duration day = 24h;

// A window of `limit` over `period`, carrying `earlier`'s counts.
void window(std::optional<policy::token_window>& w, uint64_t limit,
            duration period,
            const std::optional<policy::token_window>* earlier) {
  if (limit == 0)
    return;
  if (earlier != nullptr && *earlier) {
    w = **earlier;
    w->set_limit(limit);
  } else {
    w.emplace(limit, period);
  }
}

// A budget's limit in money (at least the smallest amount).
policy::money budget_money(double dollars) {
  return std::max<policy::money>(1, policy::to_money(dollars));
}

void budget(std::optional<policy::spend_budget>& b, double dollars,
            policy::budget_period period,
            const std::optional<policy::spend_budget>* earlier) {
  if (dollars <= 0)
    return;
  auto limit = budget_money(dollars);
  if (earlier != nullptr && *earlier) {
    b = **earlier;
    b->set_limit(limit);
  } else {
    b.emplace(limit, period);
  }
}

} // namespace

spend_scope::spend_scope(std::string name, const spend_settings& settings,
                         const spend_scope* earlier)
    : name_(std::move(name))
    , settings_(settings) {
  std::unique_lock<std::mutex> guard;
  if (earlier != nullptr)
    guard = std::unique_lock<std::mutex>{earlier->mx_};
  window(minute_, settings.tokens_per_minute, minute,
         earlier ? &earlier->minute_ : nullptr);
  window(day_, settings.tokens_per_day, day,
         earlier ? &earlier->day_ : nullptr);
  budget(daily_, settings.budget_usd_per_day, policy::budget_period::day,
         earlier ? &earlier->daily_ : nullptr);
  budget(monthly_, settings.budget_usd_per_month, policy::budget_period::month,
         earlier ? &earlier->monthly_ : nullptr);
  for (auto& m : settings.models) {
    const spend_scope* before = nullptr;
    if (earlier != nullptr)
      for (auto& [pattern, scope] : earlier->models_)
        if (pattern == m.pattern)
          before = scope.get();
    model_rules_.add(m.pattern, models_.size());
    models_.emplace_back(
        m.pattern, std::make_shared<spend_scope>(name_ + " model " + m.pattern,
                                                 m.spend, before));
  }
}

std::shared_ptr<spend_scope>
spend_scope::for_model(const std::string& model) const {
  if (models_.empty())
    return nullptr;
  auto i = model_rules_.match(model);
  return i ? models_[*i].second : nullptr;
}

spend_scope::verdict spend_scope::reserve(uint64_t tokens, policy::money cost,
                                          time_point now, wall_time wall) {
  std::lock_guard<std::mutex> guard{mx_};
  verdict v;
  // Tokens first, then money; each granted one is given back when a
  // later one refuses.
  struct step {
    policy::token_window* w;
    const char* name;
  };
  step windows[] = {{minute_ ? &*minute_ : nullptr, "tokens_per_minute"},
                    {day_ ? &*day_ : nullptr, "tokens_per_day"}};
  std::vector<policy::token_window*> taken;
  auto give_back = [&] {
    for (auto* w : taken)
      w->settle(tokens, 0, now);
  };
  for (auto& s : windows) {
    if (s.w == nullptr)
      continue;
    auto g = s.w->reserve(tokens, now);
    if (!g.ok) {
      give_back();
      v.why = g.too_large ? refused::too_large : refused::tokens;
      v.limit = s.name;
      v.limit_value = static_cast<double>(s.w->limit());
      v.retry_after = g.retry_after;
      return v;
    }
    taken.push_back(s.w);
  }
  struct money_step {
    policy::spend_budget* b;
    const char* name;
  };
  money_step budgets[] = {
      {daily_ ? &*daily_ : nullptr, "budget_usd_per_day"},
      {monthly_ ? &*monthly_ : nullptr, "budget_usd_per_month"}};
  policy::spend_budget* paid = nullptr;
  for (auto& s : budgets) {
    if (s.b == nullptr)
      continue;
    auto g = s.b->reserve(cost, wall);
    if (!g.ok) {
      if (paid != nullptr)
        paid->settle(cost, 0, wall);
      give_back();
      v.why = refused::quota;
      v.limit = s.name;
      v.limit_value = policy::to_dollars(s.b->limit());
      v.retry_after = std::chrono::duration_cast<duration>(g.resets_at - wall);
      return v;
    }
    paid = s.b;
  }
  return v;
}

void spend_scope::settle(uint64_t tokens, uint64_t used, policy::money cost,
                         policy::money spent, time_point now, wall_time wall) {
  std::lock_guard<std::mutex> guard{mx_};
  for (auto* w : {&minute_, &day_})
    if (*w)
      (*w)->settle(tokens, used, now);
  for (auto* b : {&daily_, &monthly_})
    if (*b)
      (*b)->settle(cost, spent, wall);
}

std::optional<policy::limit_state::lane>
spend_scope::token_lane(time_point now) const {
  std::lock_guard<std::mutex> guard{mx_};
  std::optional<policy::limit_state::lane> best;
  for (auto* w : {&minute_, &day_}) {
    if (!*w)
      continue;
    policy::limit_state::lane l{(*w)->limit(), (*w)->remaining(now),
                                (*w)->reset_after(now)};
    if (!best || l.remaining < best->remaining)
      best = l;
  }
  return best;
}

spend_scope::figures spend_scope::read(time_point now, wall_time wall) const {
  std::lock_guard<std::mutex> guard{mx_};
  figures f;
  if (minute_) {
    f.tokens_minute = minute_->used(now);
    f.tokens_in_flight = minute_->in_flight();
  }
  if (day_) {
    f.tokens_day = day_->used(now);
    f.tokens_in_flight = day_->in_flight();
  }
  if (daily_)
    f.spent_day = daily_->spent(wall);
  if (monthly_)
    f.spent_month = monthly_->spent(wall);
  return f;
}

std::vector<shared_limit> spend_scope::shared(uint64_t tokens,
                                              policy::money cost) const {
  constexpr std::string_view key_prefix = "key ";
  auto base = name_.rfind(key_prefix, 0) == 0
                  ? "key:" + name_.substr(key_prefix.size())
                  : "route:" + name_;
  std::vector<shared_limit> out;
  auto add = [&](const char* limit, shared_limit::kind k, uint64_t size,
                 duration period, uint64_t amount) {
    shared_limit l;
    l.name = base + ":" + limit;
    l.type = k;
    l.limit = size;
    l.period = period;
    l.amount = amount;
    out.push_back(std::move(l));
  };
  using k = shared_limit::kind;
  if (settings_.tokens_per_minute != 0)
    add("tokens_per_minute", k::window, settings_.tokens_per_minute, minute,
        tokens);
  if (settings_.tokens_per_day != 0)
    add("tokens_per_day", k::window, settings_.tokens_per_day, day, tokens);
  if (settings_.budget_usd_per_day > 0)
    add("budget_usd_per_day", k::day,
        budget_money(settings_.budget_usd_per_day), day, cost);
  if (settings_.budget_usd_per_month > 0)
    add("budget_usd_per_month", k::month,
        budget_money(settings_.budget_usd_per_month), day, cost);
  return out;
}

spend_scope::verdict
spend_scope::shared_refusal(const shared_limit& l,
                            const shared_limits::outcome& o,
                            wall_time wall) const {
  verdict v;
  // The limit's name, as a string that lives as long as the program.
  static constexpr const char* limits[] = {
      "tokens_per_minute", "tokens_per_day", "budget_usd_per_day",
      "budget_usd_per_month"};
  for (auto* name : limits)
    if (l.name.size() > std::strlen(name) &&
        l.name.compare(l.name.size() - std::strlen(name), std::string::npos,
                       name) == 0)
      v.limit = name;
  if (l.type == shared_limit::kind::window) {
    v.why = o.too_large ? refused::too_large : refused::tokens;
    v.limit_value = static_cast<double>(l.limit);
    v.retry_after = o.retry_after;
    return v;
  }
  v.why = refused::quota;
  v.limit_value = policy::to_dollars(l.limit);
  auto period = l.type == shared_limit::kind::day
                    ? policy::budget_period::day
                    : policy::budget_period::month;
  v.retry_after = std::chrono::duration_cast<duration>(
      policy::period_end(period, wall) - wall);
  return v;
}

spend_hold& spend_hold::operator=(spend_hold&& other) noexcept {
  if (this != &other) {
    // Whatever this held is given back first.
    settle(0, 0, steady::now(), std::chrono::system_clock::now());
    scopes_ = std::move(other.scopes_);
    other.scopes_.clear();
    tokens_ = other.tokens_;
    cost_ = other.cost_;
  }
  return *this;
}

spend_hold::~spend_hold() {
  settle(0, 0, steady::now(), std::chrono::system_clock::now());
}

void spend_hold::hold(std::vector<std::shared_ptr<spend_scope>> scopes,
                      uint64_t tokens, policy::money cost) {
  settle(0, 0, steady::now(), std::chrono::system_clock::now());
  scopes_ = std::move(scopes);
  tokens_ = tokens;
  cost_ = cost;
}

void spend_hold::settle(uint64_t used, policy::money spent, time_point now,
                        wall_time wall) {
  for (auto& s : scopes_)
    s->settle(tokens_, used, cost_, spent, now, wall);
  scopes_.clear();
}

spend_book::spend_book(const spend_rules& rules, const spend_book* earlier)
    : prices_(rules.prices)
    , default_max_tokens_(rules.default_max_tokens) {
  for (auto& [path, s] : rules.routes) {
    const spend_scope* before = nullptr;
    if (earlier != nullptr)
      if (auto i = earlier->routes_.find(path); i != earlier->routes_.end())
        before = i->second.get();
    routes_.emplace(path, std::make_shared<spend_scope>(path, s, before));
  }
}

std::shared_ptr<spend_scope> spend_book::route(const std::string& path) const {
  auto i = routes_.find(path);
  return i == routes_.end() ? nullptr : i->second;
}

const policy::model_price* spend_book::price(const std::string& model) const {
  auto i = prices_.find(model);
  return i == prices_.end() ? nullptr : &i->second;
}

} // namespace sluice::node
