// Raw bytes from a remote-source peer -> the frame decoder and the
// deserializers of what frames carry (runtime/remote_wire): never a crash,
// a hang, an allocation past the frame limit, or a broken invariant.
//
// Input: byte 0 seeds how the rest is cut into reads (the transport feeds
// the decoder whatever each socket read brings); the rest is what the peer
// sent on one connection, after its TLS handshake. Every whole frame's
// payload is decoded as an attempt and as a reply; one that decodes is
// encoded again and must decode to the same fields.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "sluice/runtime/remote_wire.hpp"

namespace {

using namespace sluice;
using namespace sluice::remote_wire;

void check(bool ok) {
  if (!ok)
    __builtin_trap();
}

void round_trip(const frame& f) {
  bool streamed = false;
  if (auto req = decode_attempt(f.payload, streamed)) {
    check(req->headers.size() <= max_call_headers);
    check(!req->stream_to);
    auto again = encode_attempt(f.tag, *req);
    frame_decoder d;
    int n = 0;
    auto why = d.feed(again.data(), again.size(), [&](frame&& g) {
      ++n;
      check(g.kind == frame_kind::attempt && g.tag == f.tag);
      bool s2 = false;
      auto back = decode_attempt(g.payload, s2);
      check(back.has_value());
      check(back->route == req->route && back->payload == req->payload &&
            back->model == req->model && back->stream == req->stream &&
            back->timeout == req->timeout && back->headers == req->headers);
    });
    check(why == nullptr && n == 1);
  }
  if (auto r = decode_reply(f.payload)) {
    auto again = encode_reply(f.tag, *r);
    frame_decoder d;
    int n = 0;
    auto why = d.feed(again.data(), again.size(), [&](frame&& g) {
      ++n;
      auto back = decode_reply(g.payload);
      check(back.has_value());
      check(back->body == r->body && back->status == r->status &&
            back->kind == r->kind && back->retry_after == r->retry_after &&
            back->content_type == r->content_type);
    });
    check(why == nullptr && n == 1);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  uint32_t seed = data[0] | 1u;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  size_t left = size - 1;
  frame_decoder d;
  const char* why = nullptr;
  while (left > 0 && why == nullptr) {
    // A read of 1..64 bytes, as the seed says.
    seed = seed * 1103515245u + 12345u;
    size_t n = std::min<size_t>(left, 1 + (seed >> 16) % 64);
    why = d.feed(bytes, n, [&](frame&& f) {
      check(f.payload.size() <= max_remote_frame_bytes);
      check(static_cast<uint8_t>(f.kind) >= 1 &&
            static_cast<uint8_t>(f.kind) <= 5);
      round_trip(f);
    });
    // What is held never outgrows the frame limit (plus the header and
    // the string's slack).
    check(d.held() <= 2 * max_remote_frame_bytes + header_bytes);
    bytes += n;
    left -= n;
  }
  return 0;
}
