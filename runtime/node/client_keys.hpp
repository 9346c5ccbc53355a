#pragma once

// Who a request is, for the HTTP front: the client key it presents (or
// none), what that key may use, its own session tier and request rate; and
// who may reach the operations endpoints. Keys are kept as SHA-256 digests.

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/beast/http/fields.hpp>

#include "sluice/actors/tier_owner.hpp"
#include "sluice/actors/wire/block_allocator.hpp"
#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/node/spend_ledger.hpp"
#include "sluice/runtime/policy/source/token_bucket.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice {
class admission_tiers;
} // namespace sluice

namespace sluice::node {

/// One client key as the front uses it.
class client_key {
public:
  client_key(client_key_config cfg, tier_handle tier, time_point now);

  /// The same secret as `earlier` under changed settings (a config
  /// reload): the same client, so it keeps `earlier`'s tier, its cap moved
  /// to `cfg.max_concurrent` -- the calls in flight count against the new
  /// cap, a lowered one takes effect as they end -- and its request rate
  /// and counters when `requests_per_minute` and `burst` are unchanged.
  /// Changes the shared tier at once: build only the key set that is then
  /// installed.
  client_key(client_key_config cfg, client_key& earlier, time_point now);

  const std::string& name() const noexcept { return cfg_.name; }
  const client_key_config& config() const noexcept { return cfg_; }

  /// The key's session tier: its calls in flight, capped by
  /// `max_concurrent`.
  const tier_handle& tier() const noexcept { return tier_; }

  /// Whether the key may use `model` (one of its globs matches). A request
  /// naming no model is allowed only to a key with "*" (otherwise the
  /// route's default sources would serve it whatever the key's models).
  bool may_use(std::string_view model) const noexcept;

  /// Whether the key may list and call MCP tool `tool` (its gateway name;
  /// one of its `tools` globs matches).
  bool may_call_tool(std::string_view tool) const noexcept;

  /// Takes one request from the key's rate at `now`: nothing if allowed,
  /// else how long until the next request would be.
  std::optional<duration> take(time_point now);

  /// Its request rate now, for the x-ratelimit-*-requests headers (none:
  /// no `requests_per_minute`).
  std::optional<policy::limit_state::lane> request_lane(time_point now);

  /// Its tokens and budgets; null when it sets none.
  const std::shared_ptr<spend_scope>& spend() const noexcept { return spend_; }

  /// Requests that presented this key, and those refused for its rate.
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rate_limited{0};

private:
  client_key_config cfg_;
  tier_handle tier_;
  std::mutex mx_;
  std::optional<policy::token_bucket> bucket_;
  std::shared_ptr<spend_scope> spend_;
};

/// What a request's headers present as a key.
struct presented_key {
  enum class kind {
    /// No key header at all.
    none,
    /// `Authorization` that is not `Bearer TOKEN`, or several key headers.
    malformed,
    /// A token (in `token`).
    token,
  };
  kind what = kind::none;
  std::string_view token;
};

/// Reads `Authorization: Bearer KEY` (scheme case-insensitive), else
/// `api-key`, else `x-api-key` (as some SDKs send it). A header given twice
/// is malformed.
presented_key read_presented_key(const http_fields& h);

/// The front's client keys and admin key.
class client_keys {
public:
  /// With `previous` (a config reload), a key whose name and settings
  /// are unchanged is the same key: its tier (calls in flight), request
  /// rate and counters go on. One whose secret is unchanged but not its
  /// settings is the same client under new settings (`client_key`'s
  /// second constructor): its calls in flight stay counted.
  client_keys(const auth_settings& auth, const admission_tiers& tiers,
              const client_keys* previous = nullptr);

  /// Whether calls need a key (some are configured).
  bool required() const noexcept { return !keys_.empty(); }

  /// The key whose digest is `sha256(token)`, if any. A lookup by digest:
  /// its timing can tell at most about the digest of the guess, which the
  /// guesser knows already; the final comparison is constant-time.
  client_key* find(std::string_view token) const;

  /// Whether `token` is the admin key (constant-time comparison); false
  /// when none is configured.
  bool is_admin(std::string_view token) const;

  bool has_admin_key() const noexcept { return admin_.has_value(); }

  const std::vector<std::shared_ptr<client_key>>& all() const noexcept {
    return keys_;
  }

private:
  /// The index in `keys_` of the key with digest `d`, or null.
  const size_t* find_digest(const sha256_digest& d) const;

  std::vector<std::shared_ptr<client_key>> keys_;
  std::unordered_map<std::string, size_t> by_digest_;
  std::optional<sha256_digest> admin_;
};

/// Whether a request may reach an operations endpoint (/status, /metrics,
/// /events, /admin/...).
enum class ops_access {
  allowed,
  /// 401: the admin key is configured and was not presented.
  need_admin_key,
  /// 403: this listener does not serve operations (use node.admin_listen).
  not_here,
};

/// What the operations rule looks at, named (six positional bools were
/// one transposition away from opening /admin/).
struct ops_request {
  /// The request came in on node.admin_listen.
  bool on_admin_listener = false;
  /// auth.admin_key is set.
  bool admin_key_configured = false;
  /// The request presented the admin key.
  bool admin_key_presented = false;
  /// node.admin_listen is set.
  bool admin_listener_configured = false;
  /// node.listen is a loopback address.
  bool main_listener_loopback = false;
  /// auth.keys holds client keys.
  bool client_keys_configured = false;
};

/// The rule, in one place: the admin listener serves operations to anyone
/// who reaches it; on the main listener the admin key, when configured, is
/// required; without one, operations are served there only if it listens
/// on loopback, no admin listener is configured and no client keys are
/// (with client keys, the main listener is meant for clients: a reverse
/// proxy on the same host would otherwise open /admin/ to them).
ops_access decide_ops_access(const ops_request& r) noexcept;

} // namespace sluice::node
