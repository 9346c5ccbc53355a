#include "sluice/runtime/node/client_keys.hpp"

#include <algorithm>
#include <cctype>

#include <caf/send.hpp>

#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/admission_tiers.hpp"
#include "sluice/runtime/policy/model_match.hpp"

namespace sluice::node {

namespace {

std::string digest_key(const sha256_digest& d) {
  return std::string{reinterpret_cast<const char*>(d.data()), d.size()};
}

bool iequals_prefix(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

} // namespace

client_key::client_key(client_key_config cfg, tier_handle tier, time_point now)
    : cfg_(std::move(cfg))
    , tier_(std::move(tier)) {
  if (cfg_.requests_per_minute > 0) {
    policy::quota_config q;
    q.rate_per_s = cfg_.requests_per_minute / 60.0;
    q.burst = cfg_.burst > 0 ? cfg_.burst : cfg_.requests_per_minute;
    bucket_.emplace(q, now);
  }
  if (cfg_.spend.applies())
    spend_ = std::make_shared<spend_scope>("key " + cfg_.name, cfg_.spend);
}

client_key::client_key(client_key_config cfg, client_key& earlier,
                       time_point now)
    : client_key(std::move(cfg), earlier.tier_, now) {
  // A new tier would start at zero beside the old one's calls: the cap
  // would hold for each and not for the client (issue 30, finding 4).
  tier_.counter->set_cap(cfg_.max_concurrent);
  if (tier_.owner) // a raised cap may free permits for queued waiters
    caf::anon_send(tier_.owner, wake_atom_v);
  if (cfg_.requests_per_minute == earlier.cfg_.requests_per_minute &&
      cfg_.burst == earlier.cfg_.burst) {
    std::lock_guard<std::mutex> guard{earlier.mx_};
    bucket_ = earlier.bucket_;
  }
  requests = earlier.requests.load();
  rate_limited = earlier.rate_limited.load();
  // What it used and spent goes on under its new limits.
  if (cfg_.spend.applies() && earlier.spend_)
    spend_ = std::make_shared<spend_scope>("key " + cfg_.name, cfg_.spend,
                                           earlier.spend_.get());
}

std::optional<policy::limit_state::lane>
client_key::request_lane(time_point now) {
  std::lock_guard<std::mutex> guard{mx_};
  if (!bucket_)
    return std::nullopt;
  return policy::limit_state::lane{bucket_->burst(), bucket_->available(now),
                                   bucket_->until_full(now)};
}

bool client_key::may_use(std::string_view model) const noexcept {
  if (model.empty()) // the route's default sources: any model only
    return std::find(cfg_.models.begin(), cfg_.models.end(), "*") !=
           cfg_.models.end();
  return std::any_of(
      cfg_.models.begin(), cfg_.models.end(),
      [&](const std::string& p) { return policy::glob_match(p, model); });
}

bool client_key::may_call_tool(std::string_view tool) const noexcept {
  return std::any_of(
      cfg_.tools.begin(), cfg_.tools.end(),
      [&](const std::string& p) { return policy::glob_match(p, tool); });
}

std::optional<duration> client_key::take(time_point now) {
  if (!bucket_)
    return std::nullopt;
  std::lock_guard<std::mutex> guard{mx_};
  if (bucket_->try_take(now))
    return std::nullopt;
  return bucket_->next_token(now) - now;
}

presented_key read_presented_key(const http_fields& h) {
  namespace http = boost::beast::http;
  presented_key out;
  auto from = [&](auto name, bool bearer) {
    if (h.count(name) == 0)
      return false;
    if (h.count(name) > 1) {
      out.what = presented_key::kind::malformed;
      return true;
    }
    auto v = h.find(name)->value();
    std::string_view value{v.data(), v.size()};
    if (bearer) {
      if (!iequals_prefix(value, "Bearer ")) {
        out.what = presented_key::kind::malformed;
        return true;
      }
      value.remove_prefix(7);
      while (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
    }
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
      value.remove_suffix(1);
    if (value.empty()) {
      out.what = presented_key::kind::malformed;
      return true;
    }
    out.what = presented_key::kind::token;
    out.token = value;
    return true;
  };
  if (from(http::field::authorization, true))
    return out;
  if (from("api-key", false))
    return out;
  from("x-api-key", false);
  return out;
}

namespace {

// The same key as far as its state goes (its line may move).
bool same_settings(const client_key_config& a, const client_key_config& b) {
  return a.name == b.name && same_digest(a.digest, b.digest) &&
         a.models == b.models && a.tools == b.tools &&
         a.max_concurrent == b.max_concurrent &&
         a.requests_per_minute == b.requests_per_minute && a.burst == b.burst &&
         a.spend == b.spend;
}

} // namespace

client_keys::client_keys(const auth_settings& auth,
                         const admission_tiers& tiers,
                         const client_keys* previous)
    : admin_(auth.admin_digest) {
  auto now = steady::now();
  for (auto& k : auth.keys) {
    // The previous key with this secret (digests are unique in a set).
    std::shared_ptr<client_key> earlier;
    if (previous != nullptr)
      if (auto* e = previous->find_digest(k.digest))
        earlier = previous->keys_[*e];
    by_digest_.emplace(digest_key(k.digest), keys_.size());
    if (earlier && same_settings(earlier->config(), k))
      keys_.push_back(std::move(earlier));
    else if (earlier)
      keys_.push_back(std::make_shared<client_key>(k, *earlier, now));
    else
      keys_.push_back(std::make_shared<client_key>(
          k, tiers.new_tier(k.max_concurrent), now));
  }
}

client_key* client_keys::find(std::string_view token) const {
  auto i = find_digest(sha256(token));
  return i ? keys_[*i].get() : nullptr;
}

const size_t* client_keys::find_digest(const sha256_digest& d) const {
  auto i = by_digest_.find(digest_key(d));
  if (i == by_digest_.end())
    return nullptr;
  return same_digest(keys_[i->second]->config().digest, d) ? &i->second
                                                           : nullptr;
}

bool client_keys::is_admin(std::string_view token) const {
  return admin_ && same_digest(*admin_, sha256(token));
}

ops_access decide_ops_access(const ops_request& r) noexcept {
  if (r.on_admin_listener)
    return ops_access::allowed;
  if (r.admin_key_configured)
    return r.admin_key_presented ? ops_access::allowed
                                 : ops_access::need_admin_key;
  if (r.admin_listener_configured || !r.main_listener_loopback ||
      r.client_keys_configured)
    return ops_access::not_here;
  return ops_access::allowed;
}

} // namespace sluice::node
