#pragma once

// The settings of an HTTP source, apart from the machinery they configure:
// the config reader, the source actor and its upstream client all look down
// at this header. Data only; `validate` (which reads the TLS files) is the
// source's, in `actors/http_source.hpp`.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/source/http_outcome.hpp"
#include "sluice/runtime/policy/time.hpp"

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

} // namespace sluice
