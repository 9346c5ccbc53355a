#pragma once

// The command-line numbers of the bench's standalone programs
// (sse_upstream.cpp, first_event.cpp): a whole decimal integer in
// [lo, hi], nothing before or after it.

#include <cerrno>
#include <cstdlib>

namespace bench_args {

inline bool parse_long(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

} // namespace bench_args
