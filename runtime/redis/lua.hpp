#pragma once

#include <string>

namespace sluice::redis_lua {

/// What every script that needs the time starts with: the server's clock,
/// read once, as `now` in milliseconds. The server's, so nodes whose clocks
/// differ agree on every lease expiry and progress age.
inline constexpr const char* now_prelude =
    "local t = redis.call('TIME')\n"
    "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n";

/// A script that reads the server's clock: `now_prelude` + `body`.
inline std::string timed(const char* body) {
  return std::string{now_prelude} + body;
}

} // namespace sluice::redis_lua
