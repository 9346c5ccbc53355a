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
#include "sluice/actors/upstream/http_stats.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/messages/source.hpp"
#include "sluice/runtime/policy/source/http_settings.hpp"

namespace sluice {

/// Throws `std::invalid_argument` naming the field of a nonsense setting
/// (including an `env:` header whose variable is not set, `tls` on an
/// `http://` URL, and the `tls.*` files below).
void validate(const http_source_config& cfg);

/// Throws `std::invalid_argument("FIELD: problem")`, FIELD one of
/// `ca_file`, `client_cert`, `client_key`, `server_name`, for a file that
/// cannot be read or used (no certificate in it, a key that does not match
/// the certificate) or a client certificate without its key.
void validate(const http_tls_config& cfg);

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
