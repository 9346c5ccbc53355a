#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/runtime/policy/time.hpp"

namespace sluice::policy {

/// A duration as OpenAI writes its `x-ratelimit-reset-*` headers (Go's
/// format): under a second in whole milliseconds, rounded up ("20ms",
/// "1ms"; zero is "0s"); else hours, minutes and seconds with up to three
/// decimals ("1s", "1.5s", "6m0s", "1h2m3s"). `parse_reset_duration` reads
/// it back.
std::string reset_duration_text(duration d);

/// What a client's limits stand at, for the headers every answer under a
/// limit carries (OpenAI's names): the tightest request limit and the
/// tightest token limit that apply to the call, each missing when none
/// does.
struct limit_state {
  struct lane {
    uint64_t limit = 0;
    uint64_t remaining = 0;
    /// Until it is whole again.
    duration reset = duration::zero();
  };
  std::optional<lane> requests;
  std::optional<lane> tokens;
};

/// The headers for `state`: `x-ratelimit-{limit,remaining,reset}-requests`
/// and `-tokens`, in that order, for the lanes it has.
std::vector<std::pair<std::string, std::string>>
limit_headers(const limit_state& state);

} // namespace sluice::policy
