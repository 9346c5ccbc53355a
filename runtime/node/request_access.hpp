#pragma once

// Who is asking, decided on a request's header before its body is read:
// which endpoints need the admin key, which need a client key, and the
// refusal (and its message) when the header does not bring what is needed.
// Pure: the keys are looked up through functions the caller passes, so
// tests need neither a socket nor an actor system.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/fields.hpp>

#include "sluice/runtime/node/client_keys.hpp"

namespace sluice::node {

/// Whether `path` is an operations endpoint (/status, /metrics, /events,
/// /dashboard, /admin/...): the admin key's rule applies, not the client
/// keys'.
bool is_operations_path(std::string_view path) noexcept;

/// Whether a Host header's value is an IP address or `localhost`, with or
/// without a port (`127.0.0.1:8080`, `[::1]:8080`, `localhost`): what a
/// browser sends when its user typed the address, never after a DNS
/// rebinding.
bool is_address_host(std::string_view host);

/// Whether `path` is the dashboard (/dashboard or /dashboard/...): its 401
/// asks a browser for Basic credentials.
bool is_dashboard_path(std::string_view path) noexcept;

/// The password of an `Authorization: Basic BASE64(USER:PASSWORD)` value
/// (RFC 7617; the user is ignored), or nothing if `value` is not one:
/// another scheme, invalid base64, no colon, an empty password. A browser
/// sends the admin key this way to the operations endpoints once its user
/// typed it into the dashboard's sign-in prompt.
std::optional<std::string> basic_password(std::string_view value);

/// What the rule reads of the node: fixed while the front runs, except the
/// lookups, which read the front's keys.
struct access_context {
  /// The request came in on node.admin_listen.
  bool on_admin_listener = false;
  /// node.admin_listen is set.
  bool admin_listener_configured = false;
  /// node.listen is a loopback address.
  bool main_listener_loopback = false;
  /// auth.admin_key is set.
  bool admin_key_configured = false;
  /// auth.keys holds client keys: calls need one.
  bool client_keys_configured = false;
  /// Whether a token is the admin key.
  std::function<bool(std::string_view)> is_admin_key;
  /// The client key a token is; null for none.
  std::function<client_key*(std::string_view)> find_key;
};

/// How the header is answered.
struct access_verdict {
  enum class kind {
    /// The request goes on (to its body and its route).
    allowed,
    /// 401 with `WWW-Authenticate`: a key is missing or wrong.
    unauthorized,
    /// 403: not served to this caller or on this listener.
    forbidden,
  };
  kind what = kind::allowed;
  /// The refusal's message (empty when allowed).
  std::string why;
  /// Allowed: the caller's client key; null when anonymous, and for
  /// operations (the admin key is no client key).
  client_key* key = nullptr;
};

/// The decision for a request to `path` (a path, not a raw target) with
/// `headers`. /healthz is allowed to anyone. A call route or /v1/models
/// needs a client key when some are configured (a key sent to a node
/// without keys is ignored: SDKs always send one); on the admin listener
/// they are allowed through so that the router answers them 404.
access_verdict decide_access(std::string_view path,
                             const boost::beast::http::fields& headers,
                             const access_context& ctx);

} // namespace sluice::node
