#pragma once

// When each step of one HTTP exchange must be done (SPEC §8): setting the
// connection up, and every read of the answer. The HTTP client sets one
// timer per exchange to what these return; the rules live here so that they
// are tested with plain numbers, and the client only reads its clock.

#include <optional>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// An HTTP source's timeouts (`http_source_config`), all positive.
struct exchange_timeouts {
  /// Connecting, and the TLS handshake, each step from its start.
  duration connect{};
  /// From sending the request to the first byte of the answer's body.
  duration first_byte{};
  /// Between two reads that bring body bytes.
  duration idle{};
  /// From sending the request to the answer's end.
  duration response{};
};

/// The deadline of a setup step (connect, TLS handshake) begun at `now`:
/// one connect timeout, and never past the attempt's own deadline.
time_point setup_deadline(const exchange_timeouts& t, time_point now,
                          std::optional<time_point> attempt_deadline) noexcept;

/// The deadline of the next read of an answer, the request having been
/// sent at `sent` (the write is bounded the same way): before the body's
/// first byte, `first_byte` after sending; after it, `idle` after `now`;
/// always within `response` of sending and by the attempt's deadline.
time_point read_deadline(const exchange_timeouts& t, time_point sent,
                         bool body_started, time_point now,
                         std::optional<time_point> attempt_deadline) noexcept;

} // namespace sluice::policy
