#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/fwd.hpp>

#include "messages/source.hpp"

namespace sluice {

/// An upstream reached over HTTP/1.1.
struct http_source_config {
  /// Where calls go: `http://HOST[:PORT][/PREFIX]`, HOST a name, an IPv4
  /// address or a bracketed IPv6 one (`http://[::1]:8080`), PORT 1..65535
  /// (default 80). No userinfo (`user:pw@`): credentials go in `headers`.
  /// A call on route `/v1/x` is sent as `POST PREFIX/v1/x` with the call's
  /// payload as JSON body. (`https://` is not supported yet.)
  std::string base_url;
  /// Extra request headers. A value `env:NAME` is read from the environment
  /// variable NAME when the source starts (for secrets such as
  /// `Authorization`); header values are never logged.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Longest wait for the TCP connection.
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
  /// Idle keep-alive connections kept for reuse.
  size_t max_idle_connections = 16;
  /// Longest 2xx body held in memory (a unary call); a longer one is a
  /// `transient` failure and its connection is closed. A streamed 2xx body
  /// is passed on as it arrives and has no such limit.
  uint64_t max_body_bytes = 64 * 1024 * 1024;
  /// Longest error (non-2xx) body read, streamed call or not; past it the
  /// connection is closed and the answer, still classified by its status,
  /// carries a short JSON note instead of the body.
  uint64_t max_error_body_bytes = 1024 * 1024;
};

/// Throws `std::invalid_argument` naming the field of a nonsense setting
/// (including an `env:` header whose variable is not set).
void validate(const http_source_config& cfg);

/// What an HTTP source has done; readable from any thread.
struct http_source_stats {
  std::atomic<uint64_t> attempts{0};
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
};

struct http_source {
  source_actor actor;
  std::shared_ptr<const http_source_stats> stats;
};

/// Spawns an HTTP source: a Beast async client with a keep-alive pool on its
/// own I/O thread. Classifies answers (2xx ok, 429 rate limited, 408/5xx and
/// connection errors transient, timeouts timeout, other 4xx permanent) and
/// reads Retry-After (seconds or HTTP-date). A streamed call's 2xx answer
/// is passed on to `stream_to` as its bytes arrive; an error answer is read
/// whole (up to `max_error_body_bytes`), so it can still be retried
/// elsewhere. 1xx interim answers are skipped; a connection goes back to
/// the pool only after a complete keep-alive answer with nothing behind it,
/// and is checked for pending bytes or a close when taken out. An upstream
/// 401/403/407 (the gateway's own credentials refused) becomes a
/// `permanent` 502 with a generic body: the upstream's body is neither
/// passed on nor logged. When the requester of an attempt terminates (the
/// call was cancelled or timed out), the upstream request is closed at
/// once.
http_source spawn_http_source(caf::actor_system& sys, http_source_config cfg);

} // namespace sluice
