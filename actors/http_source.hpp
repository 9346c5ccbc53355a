#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "sluice/actors/direct_attempts.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/source/http_outcome.hpp"

namespace sluice {

/// How an `https://` source checks its upstream and shows itself. The
/// default verifies: the system CA store, SNI and the certificate's name
/// checked against the URL's host (RFC 6125, OpenSSL's own matching).
struct http_tls_config {
  /// PEM file of the CAs to trust instead of the system store (empty: the
  /// system store, `/etc/ssl/certs`).
  std::string ca_file;
  /// PEM certificate (chain) presented to an upstream that asks for one
  /// (mutual TLS), and its PEM private key: both or neither.
  std::string client_cert;
  std::string client_key;
  /// The name sent as SNI and required in the certificate (empty: the
  /// URL's host). An IP address is checked against the certificate's IP
  /// entries and not sent as SNI (RFC 6066).
  std::string server_name;
  /// Verify the upstream's certificate. `false` accepts any certificate
  /// (anyone on the path can read and change the traffic): only when
  /// written explicitly, logged as a warning at start and shown in /status.
  bool verify = true;
};

/// An upstream reached over HTTP/1.1, plain or over TLS.
struct http_source_config {
  /// Where calls go: `http[s]://HOST[:PORT][/PREFIX]`, HOST a name, an IPv4
  /// address or a bracketed IPv6 one (`http://[::1]:8080`), PORT 1..65535
  /// (default 80, or 443 for https). No userinfo (`user:pw@`): credentials
  /// go in `headers`. A call on route `/v1/x` is sent as `POST PREFIX/v1/x`
  /// with the call's payload as JSON body, the path segments PREFIX ends
  /// with and the route starts with written once (`upstream_target`).
  std::string base_url;
  /// TLS settings of an `https://` source (unset: the defaults, which
  /// verify). Set on an `http://` source is an error.
  std::optional<http_tls_config> tls;
  /// Names the source in log lines (the runtime sets it to the source's
  /// name; empty: the base URL names it).
  std::string log_name;
  /// Extra request headers. A value `env:NAME` is read from the environment
  /// variable NAME when the source starts (for secrets such as
  /// `Authorization`); header values are never logged.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Longest wait for the TCP connection, and again for the TLS handshake
  /// of an `https://` source.
  duration connect_timeout = std::chrono::seconds{5};
  /// Longest wait, from sending the request, for the first byte of the
  /// answer's body (time to first token of a streamed answer; the whole
  /// answer, in practice, of a unary one).
  duration first_byte_timeout = std::chrono::seconds{120};
  /// Longest silence between two pieces of the body once it has begun (a
  /// stalled stream).
  duration idle_timeout = std::chrono::seconds{60};
  /// Longest wait for the whole answer once sent (the governor's attempt
  /// timeout bounds it too).
  duration response_timeout = std::chrono::seconds{300};
  /// The most connections the keep-alive pool keeps for reuse, per loop
  /// (`policy::pool_target`): it keeps as many, in use and idle together,
  /// as calls ran at once in the last minute or two, up to this. The
  /// default is AIMD's default `max`: a source never runs more calls at
  /// once than that, so a pool of its size closes none still needed.
  size_t max_idle_connections = 256;
  /// Longest 2xx body held in memory (a unary call); a longer one is a
  /// `transient` failure and its connection is closed. A streamed 2xx body
  /// is passed on as it arrives and has no such limit.
  uint64_t max_body_bytes = 64 * 1024 * 1024;
  /// Longest error (non-2xx) body read, streamed call or not; past it the
  /// connection is closed and the answer, still classified by its status,
  /// carries a short JSON note instead of the body.
  uint64_t max_error_body_bytes = 1024 * 1024;
  /// How the upstream's statuses are classed (default: SPEC §4's, see
  /// `policy::classify_http_status`): e.g. a 404 of a flaky deployment
  /// retried elsewhere, a 503 that means "this request never works" not
  /// retried, an empty 200 taken as a failure.
  policy::status_rules statuses;
};

/// Throws `std::invalid_argument` naming the field of a nonsense setting
/// (including an `env:` header whose variable is not set, `tls` on an
/// `http://` URL, and the `tls.*` files below).
void validate(const http_source_config& cfg);

/// Throws `std::invalid_argument("FIELD: problem")`, FIELD one of
/// `ca_file`, `client_cert`, `client_key`, `server_name`, for a file that
/// cannot be read or used (no certificate in it, a key that does not match
/// the certificate) or a client certificate without its key.
void validate(const http_tls_config& cfg);

/// The path an HTTP source sends a call on `route` to, its `base_url` path
/// being `base_path` (no trailing '/'): `base_path + route`, except that
/// whole path segments the base path ends with and the route starts with
/// are written once, the longest such overlap that leaves the route a
/// segment of its own. So `/v1` + `/v1/chat/completions` is
/// `/v1/chat/completions` (a base URL copied from a provider's docs,
/// `https://api.openai.com/v1`, works), `/openai/v1` + `/v1/x` is
/// `/openai/v1/x`, and `/api` + `/v1/x` or `/v1` + `/v10/x` join plainly.
std::string upstream_target(std::string_view base_path, std::string_view route);

/// What an HTTP source has done; readable from any thread.
struct http_source_stats {
  std::atomic<uint64_t> attempts{0};
  /// Of `attempts`, those a governor started itself on its own loop (the
  /// loop scheduler), not through the source's actor.
  std::atomic<uint64_t> direct_attempts{0};
  std::atomic<uint64_t> connections_opened{0};
  std::atomic<uint64_t> connections_reused{0};
  std::atomic<uint64_t> cancelled{0};
  std::atomic<int64_t> in_flight{0};
  /// Pooled connections found closed or with bytes pending when taken for
  /// reuse, and closed instead.
  std::atomic<uint64_t> pool_discards{0};
  /// Answers that broke HTTP/1.1 framing (the connection was closed).
  std::atomic<uint64_t> framing_errors{0};
  /// Answers whose body went past its limit (the connection was closed).
  std::atomic<uint64_t> oversized_bodies{0};
  /// TLS handshakes completed (one per connection opened to an https://
  /// upstream; reuse needs none).
  std::atomic<uint64_t> tls_handshakes{0};
  /// TLS handshakes that failed: the certificate refused (see
  /// `tls_verify_failures`), a protocol error, a timeout.
  std::atomic<uint64_t> tls_handshake_failures{0};
  /// Handshakes refused because the upstream's certificate did not verify
  /// (unknown CA, wrong name, expired, ...).
  std::atomic<uint64_t> tls_verify_failures{0};
};

struct http_source {
  source_actor actor;
  std::shared_ptr<const http_source_stats> stats;
  /// It talks TLS (`https://`).
  bool tls = false;
  /// Its upstream's certificate is verified (false only with an explicit
  /// `tls.verify = false`).
  bool tls_verify = true;
  /// On the loop scheduler: its attempts as a governor starts them on its
  /// own loop (expires with the actor). Empty under other schedulers.
  std::weak_ptr<direct_attempts> direct;
};

/// Spawns an HTTP source: a Beast async client with a keep-alive pool on its
/// own I/O thread. Classifies answers (2xx ok, 429 rate limited, 408/5xx and
/// connection errors transient, timeouts timeout, other 4xx permanent) and
/// reads Retry-After (seconds or HTTP-date). A streamed call's 2xx answer
/// is passed on to `stream_to` as its bytes arrive; an error answer is read
/// whole (up to `max_error_body_bytes`), so it can still be retried
/// elsewhere. A call's `headers` follow the source's own and replace none
/// of them (nor Host, Authorization, Content-Length, Content-Type,
/// Transfer-Encoding, Connection: those names are skipped). 1xx interim
/// answers are skipped; a connection goes back to the pool only after a
/// complete keep-alive answer with nothing behind it, and is checked for pending bytes or a close when taken out. An upstream
/// 401/403/407 (the gateway's own credentials refused) becomes a
/// `permanent` 502 with a generic body: the upstream's body is neither
/// passed on nor logged. When the requester of an attempt terminates (the
/// call was cancelled or timed out), the upstream request is closed at
/// once. An `https://` source does all of this over TLS; a handshake that
/// fails (a certificate that does not verify included) is a connect
/// failure, `transient`, its reason logged and in the reply body.
/// Throws `std::invalid_argument` for settings `validate` refuses.
http_source spawn_http_source(caf::actor_system& sys, http_source_config cfg);

} // namespace sluice
