#pragma once

#include <atomic>
#include <cstdint>

namespace sluice {

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

} // namespace sluice
