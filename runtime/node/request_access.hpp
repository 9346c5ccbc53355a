#pragma once

// Who is asking, decided on a request's header before its body is read:
// which endpoints need the admin key, which need a client key, and the
// refusal (and its message) when the header does not bring what is needed.
// Pure: the keys are looked up through functions the caller passes, so
// tests need neither a socket nor an actor system.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include "sluice/actors/wire/block_allocator.hpp"
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

/// Whether a Host header's value is an address or `localhost`
/// (`is_address_host`) or one of `names` (lowercase, without a port), with
/// or without a port.
bool is_known_host(std::string_view host,
                   const std::vector<std::string>& names);

/// How long a browser may keep a preflight's answer (`Access-Control-Max-
/// Age`): short, so a restart with other `node.allowed_origins` is seen
/// soon.
constexpr std::chrono::seconds preflight_max_age{600};

/// The request headers a preflight is told a page may send, besides those
/// it asks for (when they are plain header names).
constexpr const char* cors_allowed_headers =
    "Authorization, Content-Type, X-Session-Id, X-Request-Id, api-key, "
    "x-api-key, traceparent, tracestate";

/// Longest `Access-Control-Request-Headers` echoed back to a preflight.
constexpr size_t max_preflight_headers_bytes = 1024;

/// Marks an answer readable by a page of `origin` (non-empty): the
/// `Access-Control-Allow-Origin` of a response, with `Vary: Origin` and
/// the headers a page may read besides the safelisted ones.
void set_cors_headers(http_fields& h, std::string_view origin);

/// The headers of the 204 answering a preflight from `origin`, which asked
/// in `request`: `set_cors_headers`, the methods, the headers (ours and
/// those it asked for), `Access-Control-Max-Age`.
void set_preflight_headers(http_fields& h, std::string_view origin,
                           const http_fields& request);

/// Whether `path` is the dashboard (/dashboard or /dashboard/...): its 401
/// asks a browser for Basic credentials.
bool is_dashboard_path(std::string_view path) noexcept;

/// The password of an `Authorization: Basic BASE64(USER:PASSWORD)` value
/// (RFC 7617; the user is ignored), or nothing if `value` is not one:
/// another scheme, invalid base64, no colon, an empty password. A browser
/// sends the admin key this way to the operations endpoints once its user
/// typed it into the dashboard's sign-in prompt.
std::optional<std::string> basic_password(std::string_view value);

/// `value` decoded from base64 (RFC 4648, padded to a multiple of four);
/// none when it is not that.
std::optional<std::string> decode_base64(std::string_view value);

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
  /// `node.allowed_hosts` (lowercase names; null: none).
  const std::vector<std::string>* allowed_hosts = nullptr;
  /// `node.allowed_origins` (normalised origins, or "*"; null: none).
  const std::vector<std::string>* allowed_origins = nullptr;
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
    /// A CORS preflight from an allowed origin: 204 with
    /// `set_preflight_headers(allow_origin)`.
    preflight,
  };
  kind what = kind::allowed;
  /// The refusal's message (empty when allowed).
  std::string why;
  /// Allowed: the caller's client key; null when anonymous, and for
  /// operations (the admin key is no client key).
  client_key* key = nullptr;
  /// Allowed or preflight: the origin whose page may read the answer
  /// (`set_cors_headers`); empty: none (no Origin, the node's own, or one
  /// not listed).
  std::string allow_origin;
};

/// The decision for a `method` request to `path` (a path, not a raw
/// target) with `headers`. /healthz is allowed to anyone. A call route or
/// /v1/models needs a client key when some are configured (a key sent to a
/// node without keys is ignored: SDKs always send one); on the admin
/// listener they are allowed through so that the router answers them 404.
///
/// Browsers (issue 30, finding 2): a request served without a key -- a
/// call on a node without client keys, an operation without the admin key
/// on the main listener -- would spend the node's upstream credentials or
/// show its state to whatever page sent it. It is refused (403) when its
/// `Host` is a name that is not in `node.allowed_hosts` (a page whose name
/// was rebound to this address: DNS rebinding) or its `Origin` is another
/// site's: neither the node's own (`http://` + its Host) nor listed in
/// `node.allowed_origins` ("*" counts only for requests with a client
/// key). An `OPTIONS` preflight from an allowed origin (or "*" with client
/// keys configured) is answered `preflight`, any other 403; operations
/// take none.
access_verdict decide_access(boost::beast::http::verb method,
                             std::string_view path, const http_fields& headers,
                             const access_context& ctx);

} // namespace sluice::node
