#include "sluice/runtime/node/call_spend.hpp"

#include <cmath>

#include "sluice/actors/usage.hpp"

namespace sluice::node {

namespace {

std::string per(const char* limit) {
  std::string_view l{limit};
  if (l == "tokens_per_minute")
    return "tokens per min (TPM)";
  if (l == "tokens_per_day")
    return "tokens per day (TPD)";
  if (l == "budget_usd_per_day")
    return "budget per day";
  return "budget per month";
}

std::string whole(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string dollars(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

refusal refusal_of(const spend_scope& scope, const spend_scope::verdict& v,
                   uint64_t requested) {
  using why = spend_scope::refused;
  if (v.why == why::quota) {
    auto r = refused(errc::insufficient_quota,
                     "You exceeded the " + per(v.limit) + " of " +
                         scope.name() + " ($" + dollars(v.limit_value) +
                         "); it is whole again at the period's end (UTC)");
    r.retry_after_s = std::chrono::duration<double>(v.retry_after).count();
    return r;
  }
  if (v.why == why::too_large) {
    auto r = refused(errc::rate_limited,
                     "Request too large for " + scope.name() + " on " +
                         per(v.limit) + ": Limit " + whole(v.limit_value) +
                         ", Requested " + std::to_string(requested) +
                         ". Send fewer tokens or a lower max_tokens.");
    r.type = "tokens";
    return r;
  }
  auto r = refused(errc::rate_limited,
                   "Rate limit reached for " + scope.name() + " on " +
                       per(v.limit) + ": Limit " + whole(v.limit_value) +
                       ", Requested " + std::to_string(requested) + ".");
  r.type = "tokens";
  // Zero: only calls in flight stand in the way; their ends free it.
  r.retry_after_s =
      std::max(1.0, std::chrono::duration<double>(v.retry_after).count());
  return r;
}

} // namespace

call_spend::~call_spend() {
  give_back();
}

void call_spend::give_back() {
  if (!reservation_.empty() && ledger_) {
    auto zero = limits_;
    for (auto& l : zero)
      l.amount = 0;
    ledger_->settle(reservation_, std::move(zero));
  }
  reservation_.clear();
}

void call_spend::reset() {
  give_back();
  hold_ = spend_hold{};
  scopes_.clear();
  tokens_ = 0;
  estimated_cost_ = 0;
  key_ = nullptr;
  route_scope_.reset();
  ledger_.reset();
  limits_.clear();
  owners_.clear();
  waiting_ = false;
  stream_.reset();
  estimate_ = {};
  price_.reset();
  relayed_bytes_ = 0;
  headers_.clear();
  usage_.reset();
  cost_ = 0;
  metered_ = false;
  estimated_ = false;
}

std::optional<refusal> call_spend::open(client_key* key, const spend_book& book,
                                        const std::string& route,
                                        const std::string& model, bool stream,
                                        std::string& body, time_point now,
                                        wall_time wall,
                                        std::shared_ptr<shared_spend> shared) {
  reset();
  key_ = key;
  route_scope_ = book.route(route);
  ledger_ = std::move(shared);
  // The key's and the route's own limits, and their model's within them.
  for (auto* base :
       {key != nullptr ? key->spend().get() : nullptr, route_scope_.get()}) {
    if (base == nullptr)
      continue;
    if (base->settings().any())
      scopes_.push_back(base == route_scope_.get() ? route_scope_
                                                   : key->spend());
    if (auto m = base->for_model(model))
      scopes_.push_back(std::move(m));
  }
  metered_ = true;
  if (auto* p = book.price(model))
    price_ = *p;
  estimate_rules rules;
  rules.default_completion = book.default_max_tokens();
  if (scopes_.empty()) {
    // No limit applies: the call's usage is still read for the access log
    // and /metrics -- a streamed one's only when its model has a price
    // (its upstream is asked then, so that its cost is known).
    if (key != nullptr)
      set_headers(key, nullptr, now);
    if (price_) {
      estimate_ = estimate_request(body, rules);
      estimated_ = true;
      if (stream)
        watch_stream(body);
    }
    return std::nullopt;
  }
  estimate_ = estimate_request(body, rules);
  estimated_ = true;
  bool budgeted = false;
  for (auto& s : scopes_)
    budgeted = budgeted || s->settings().has_budget();
  if (budgeted && !price_) {
    for (auto& s : scopes_)
      if (s->settings().has_budget())
        return refused(errc::forbidden,
                       "model '" + model + "' has no price in [prices], and " +
                           s->name() + " has a budget that must count it",
                       "model");
  }
  estimated_cost_ = price_ ? policy::cost_of(estimate_, *price_) : 0;
  tokens_ = estimate_.total();
  if (ledger_) {
    for (auto& s : scopes_)
      for (auto& l : s->shared(tokens_, estimated_cost_)) {
        limits_.push_back(std::move(l));
        owners_.push_back(s.get());
      }
    waiting_ = true;
  } else if (auto no = reserve_here(now, wall)) {
    return no;
  }
  if (stream)
    watch_stream(body);
  if (!waiting_)
    set_headers(key, route_scope_.get(), now);
  return std::nullopt;
}

void call_spend::watch_stream(std::string& body) {
  auto asked = ask_for_usage(body);
  if (asked.added)
    body = std::move(asked.body);
  stream_.emplace(asked.added);
}

std::optional<refusal> call_spend::reserve_here(time_point now,
                                                wall_time wall) {
  std::vector<std::shared_ptr<spend_scope>> held;
  for (auto& s : scopes_) {
    auto v = s->reserve(tokens_, estimated_cost_, now, wall);
    if (v.why != spend_scope::refused::none) {
      for (auto& h : held)
        h->settle(tokens_, 0, estimated_cost_, 0, now, wall);
      set_headers(key_, route_scope_.get(), now);
      return refusal_of(*s, v, tokens_);
    }
    held.push_back(s);
  }
  hold_.hold(std::move(held), tokens_, estimated_cost_);
  return std::nullopt;
}

std::optional<refusal> call_spend::on_shared(const shared_limits::outcome& o,
                                             time_point now, wall_time wall) {
  if (!waiting_)
    return std::nullopt;
  waiting_ = false;
  if (!o.answered) {
    if (ledger_ && ledger_->open_when_down()) {
      // Fail-open: this node counts alone until Redis is back.
      if (auto no = reserve_here(now, wall))
        return no;
      set_headers(key_, route_scope_.get(), now);
      return std::nullopt;
    }
    auto r = refused(errc::governance_backend_error,
                     "the spend ledger (Redis) did not answer (" + o.error +
                         "); calls under a token limit or budget are refused "
                         "until it does (backend.spend_when_down = "
                         "\"closed\")");
    r.retry_after_s = 1;
    return r;
  }
  // The headers: the key's request rate and the tightest token window.
  policy::limit_state st;
  if (key_ != nullptr)
    st.requests = key_->request_lane(now);
  for (size_t i = 0; i < limits_.size() && i < o.remaining.size(); ++i) {
    if (limits_[i].type != shared_limit::kind::window)
      continue;
    policy::limit_state::lane l{limits_[i].limit, o.remaining[i],
                                o.reset_after[i]};
    if (!st.tokens || l.remaining < st.tokens->remaining)
      st.tokens = l;
  }
  headers_ = policy::limit_headers(st);
  if (!o.ok) {
    auto i = std::min(o.refused, limits_.size() - 1);
    return refusal_of(*owners_[i],
                      owners_[i]->shared_refusal(limits_[i], o, wall),
                      limits_[i].amount);
  }
  reservation_ = o.reservation;
  return std::nullopt;
}

void call_spend::set_headers(client_key* key, const spend_scope* route_scope,
                             time_point now) {
  policy::limit_state st;
  if (key != nullptr)
    st.requests = key->request_lane(now);
  // The tightest token limit of the call's scopes (before they are known:
  // the key's and the route's own).
  auto tighten = [&](const spend_scope* s) {
    if (s == nullptr)
      return;
    if (auto l = s->token_lane(now))
      if (!st.tokens || l->remaining < st.tokens->remaining)
        st.tokens = l;
  };
  if (!scopes_.empty()) {
    for (auto& s : scopes_)
      tighten(s.get());
  } else {
    tighten(key != nullptr ? key->spend().get() : nullptr);
    tighten(route_scope);
  }
  headers_ = policy::limit_headers(st);
}

void call_spend::on_piece(std::string& piece) {
  relayed_bytes_ += piece.size();
  if (stream_)
    stream_->feed(piece);
}

std::string call_spend::flush() {
  return stream_ ? stream_->flush() : std::string{};
}

void call_spend::close(const call_result& r, time_point now, wall_time wall) {
  if (!metered_)
    return;
  metered_ = false;
  if (r.streamed && stream_)
    usage_ = stream_->usage();
  else if (!r.streamed && !r.body.empty())
    usage_ = read_usage(r.body);
  bool answered = r.ok() || r.status == call_status::upstream_error;
  if (!usage_ && answered && estimated_) {
    // No usage said: the request's prompt estimate, and the answer's
    // bytes as completion tokens at the estimate's rate.
    estimate_rules rules;
    policy::token_usage u;
    u.prompt = estimate_.prompt;
    auto bytes = r.streamed ? relayed_bytes_ : r.body.size();
    u.completion = (bytes + rules.bytes_per_token - 1) / rules.bytes_per_token;
    u.estimated = true;
    usage_ = u;
  }
  auto used = usage_ ? *usage_ : policy::token_usage{};
  cost_ = price_ && usage_ ? policy::cost_of(used, *price_) : 0;
  hold_.settle(used.total(), cost_, now, wall);
  if (!reservation_.empty() && ledger_) {
    auto spent = limits_;
    for (auto& l : spent)
      l.amount = l.type == shared_limit::kind::window ? used.total() : cost_;
    ledger_->settle(reservation_, std::move(spent));
    reservation_.clear();
  }
}

} // namespace sluice::node
