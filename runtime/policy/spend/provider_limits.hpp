#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// The longest reset a provider's header may announce: a day. Longer ones
/// (a duration of 10^9 s, an instant in year 9999) saturate here rather
/// than overflow the nanosecond clock; a day is longer than any window a
/// provider counts in (per minute, per day), so a saturated reset still
/// means "not soon", and a new answer's headers replace it anyway.
constexpr duration provider_reset_saturation = std::chrono::hours{24};

/// The highest count a provider's header may announce; larger numbers (or
/// more digits than fit) saturate here.
constexpr uint64_t provider_count_saturation = uint64_t{1} << 53;

/// One limit a provider counts: its size, what is left of it, and how long
/// until it is full again (from the answer's arrival). Each field is
/// missing when no header said it (or the header was not understood).
struct limit_lane {
  std::optional<uint64_t> limit;
  std::optional<uint64_t> remaining;
  std::optional<duration> reset;

  bool empty() const noexcept { return !limit && !remaining && !reset; }
};

/// What an upstream said of its own rate limits in one answer's headers
/// (SPEC §12): OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,
/// tokens}` and Anthropic's `anthropic-ratelimit-{requests,tokens,
/// input-tokens,output-tokens}-{limit,remaining,reset}`.
struct provider_limits {
  limit_lane requests;
  limit_lane tokens;
  /// Anthropic's separate input and output token limits.
  limit_lane input_tokens;
  limit_lane output_tokens;

  /// The token limit a call must fit: of the lanes that say what remains,
  /// the one with the least remaining (ties: the later reset); else
  /// `tokens`.
  limit_lane token_lane() const noexcept;

  /// No header was understood.
  bool empty() const noexcept;
};

/// A count: decimal digits only (no sign, no space), saturating at
/// `provider_count_saturation`. Nothing for anything else.
std::optional<uint64_t> parse_limit_count(std::string_view value) noexcept;

/// OpenAI's reset duration: one or more NUMBER UNIT parts, units `h`, `m`,
/// `s`, `ms` (and `us`, `ns`), a number with an optional fraction
/// ("6m0s", "1s", "20ms", "1h2m3.5s", "0.5s"); a bare number is seconds.
/// Saturates at `provider_reset_saturation`. Nothing for anything else.
std::optional<duration> parse_reset_duration(std::string_view value) noexcept;

/// Anthropic's reset instant, RFC 3339 in UTC or with an offset
/// ("2026-12-05T07:30:00Z", "...T07:30:00.5+01:00"), as a wait from `now`:
/// zero for an instant past, saturating at `provider_reset_saturation`.
/// Nothing for anything else.
std::optional<duration>
parse_reset_instant(std::string_view value,
                    std::chrono::system_clock::time_point now) noexcept;

/// Reads one answer header into `limits`, if it is one of the rate-limit
/// headers above (`name` in any case); others, and values not understood,
/// are ignored.
void read_limit_header(provider_limits& limits, std::string_view name,
                       std::string_view value,
                       std::chrono::system_clock::time_point now) noexcept;

} // namespace sluice::policy
