#pragma once

// The wire of a source in another process (runtime/remote_source.hpp): the
// frames that cross a mutually authenticated TLS connection between a node
// and a served source. Pure encoding and decoding, no I/O: the transport
// (runtime/remote_link.hpp) feeds what it reads to a `frame_decoder`, and
// the fuzz target (fuzz/remote_wire_fuzz.cpp) feeds it anything.
//
// A frame is a fixed 13-byte header -- the payload's length (u32), the
// kind (u8), the attempt's tag (u64), all big-endian -- then the payload.
// The length is checked against `max_remote_frame_bytes` before a byte of
// the payload is stored, so a header announcing 4 GiB costs nothing but
// the connection. Only five kinds exist, and none of them can name an
// actor: what a peer sends can ask for an attempt, answer or cancel one,
// stream its bytes, or keep the link alive -- never end an actor.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "sluice/messages/call.hpp"

namespace sluice::remote_wire {

/// The fixed header: payload length, kind, tag.
constexpr size_t header_bytes = 13;

/// The longest payload a frame may announce: an answer body of 64 MiB
/// (`max_remote_body_bytes`) with room for its other fields. A longer
/// announcement closes the connection before anything is allocated.
constexpr size_t max_remote_frame_bytes =
    (size_t{64} << 20) + (size_t{1} << 16);

enum class frame_kind : uint8_t {
  /// node -> served: payload a `call_request` (without its actor handle).
  attempt = 1,
  /// served -> node: payload a `source_reply`; the attempt ends.
  reply = 2,
  /// served -> node: payload raw bytes of a streamed answer.
  chunk = 3,
  /// node -> served: the attempt is withdrawn (its requester went).
  cancel = 4,
  /// either way, every `remote_heartbeat`: the link is alive.
  heartbeat = 5,
};

/// One decoded frame.
struct frame {
  frame_kind kind = frame_kind::heartbeat;
  uint64_t tag = 0;
  std::string payload;
};

/// A whole frame, header and payload, ready to write.
std::string encode(frame_kind kind, uint64_t tag, const std::string& payload);

/// An attempt: every field of `req` but `stream_to`, which never crosses
/// (the served side streams under the attempt's tag); whether it is set
/// crosses as a flag.
std::string encode_attempt(uint64_t tag, const call_request& req);

std::string encode_reply(uint64_t tag, const source_reply& reply);

/// The inverse of `encode_attempt`'s payload; nothing if it is malformed,
/// has bytes left over, or carries more than `max_call_headers` headers.
/// `streamed` tells whether the node asked for chunks.
std::optional<call_request> decode_attempt(const std::string& payload,
                                           bool& streamed);

/// The inverse of `encode_reply`'s payload; nothing if it is malformed or
/// has bytes left over. (The node checks the values: runtime/remote_source.)
std::optional<source_reply> decode_reply(const std::string& payload);

/// Splits a byte stream into frames. Holds at most one frame's payload,
/// allocated only once its header passed the checks.
class frame_decoder {
public:
  /// Takes `n` bytes; calls `on_frame(frame&&)` for each frame completed.
  /// Returns nullptr, or why the stream is refused (an unknown kind, a
  /// length past the limit, a payload where none belongs): the connection
  /// must close, and the decoder takes nothing more.
  template <class OnFrame>
  const char* feed(const char* data, size_t n, OnFrame&& on_frame) {
    while (n > 0 && error_ == nullptr) {
      auto used = step(data, n);
      data += used;
      n -= used;
      if (ready_) {
        ready_ = false;
        on_frame(std::move(current_));
        current_ = frame{};
      }
    }
    return error_;
  }

  /// The bytes held for the frame in progress (tests: the bound).
  size_t held() const noexcept {
    return header_filled_ + current_.payload.capacity();
  }

private:
  /// Consumes what it can of one frame; sets `ready_` when it completes.
  size_t step(const char* data, size_t n);

  std::array<unsigned char, header_bytes> header_{};
  size_t header_filled_ = 0;
  /// The payload's announced length (valid once the header is in).
  size_t want_ = 0;
  frame current_;
  bool ready_ = false;
  const char* error_ = nullptr;
};

} // namespace sluice::remote_wire
