// Raw upstream bytes -> the HTTP source's answer reading
// (actors/upstream_response: 1xx skipping, body limits, the keep-alive reuse
// verdict) -> an outcome, as the engine does it: never a crash, a hang or a
// broken invariant.
//
// Input: byte 0 picks the limits and whether the call is streamed, byte 1
// seeds how the rest is cut into reads; the rest is what the upstream sent
// on one connection. While an answer leaves the connection reusable, the
// bytes after it are read as the answer to the next request on it (what
// the engine would do had the check before reuse found nothing pending).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sluice/actors/upstream/response.hpp"

namespace {

using namespace sluice::upstream;

/// Answers read from one input at most (requests on one connection).
constexpr int max_answers_per_input = 8;

void check(bool ok) {
  if (!ok)
    __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2)
    return 0;
  const uint64_t body_caps[] = {16, 1024, 64 * 1024 * 1024, 1};
  const uint64_t error_caps[] = {16, 1024, 1024 * 1024, 1};
  response_limits lim;
  lim.max_body_bytes = body_caps[data[0] & 3];
  lim.max_error_body_bytes = error_caps[(data[0] >> 2) & 3];
  lim.stream_2xx = (data[0] & 0x10) != 0;
  uint32_t rng = data[1] * 2654435761u + 1;
  std::string_view rest{reinterpret_cast<const char*>(data) + 2, size - 2};
  const auto now = std::chrono::system_clock::time_point{} +
                   std::chrono::hours{24 * 365 * 50};
  for (int answer = 0; answer < max_answers_per_input; ++answer) {
    response_reader rd{lim};
    uint64_t streamed = 0;
    // Reads of 1..64 bytes, or larger now and then, as a socket delivers.
    while (rd.verdict() == read_verdict::reading && !rest.empty()) {
      rng = rng * 1103515245u + 12345u;
      size_t n = (rng >> 16) % 8 == 0 ? 4096 : 1 + (rng >> 16) % 64;
      n = n < rest.size() ? n : rest.size();
      auto before = rd.body_bytes();
      rd.put(rest.substr(0, n));
      rest.remove_prefix(n);
      check(rd.body_bytes() >= before);
      if (rd.streaming())
        streamed += rd.take_body().size();
    }
    if (rd.verdict() == read_verdict::reading)
      rd.eof();
    if (rd.streaming())
      streamed += rd.take_body().size();
    check(rd.verdict() != read_verdict::reading);
    check(rd.interim_responses() <= max_interim_responses);
    check(!rd.reusable() || rd.verdict() == read_verdict::complete);
    auto held_limit = rd.status() >= 200 && rd.status() < 300
                          ? lim.max_body_bytes
                          : lim.max_error_body_bytes;
    if (!rd.streaming())
      check(rd.body_bytes() <= held_limit);
    auto reply = make_reply(rd, now);
    check(reply.body.size() <= held_limit || reply.body.size() < 256);
    if (rd.streaming())
      check(reply.body.empty() || rd.verdict() != read_verdict::complete);
    (void)streamed;
    if (!rd.reusable() || rest.empty())
      break;
  }
  return 0;
}
