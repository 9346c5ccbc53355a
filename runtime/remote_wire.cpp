#include "sluice/runtime/remote_wire.hpp"

#include <algorithm>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

namespace sluice::remote_wire {

namespace {

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_be(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | p[i];
  return v;
}

// The fields of a call that cross: all but the governor's handle, whose
// place a flag takes. (call_request's own inspect() serializes the handle,
// which only CAF's middleman can resolve -- and which must never cross.)
template <class Inspector>
typename Inspector::result_type inspect_attempt(Inspector& f, call_request& x,
                                                bool& streamed) {
  return f(x.route, x.payload, x.model, x.stream, streamed, x.timeout,
           x.headers);
}

// Serializes with CAF's binary serializer (no actor system: nothing in
// these types needs one).
template <class F>
std::string serialized(F&& apply) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  if (auto err = apply(sink))
    return {}; // a serializer on memory does not fail
  return {buf.begin(), buf.end()};
}

} // namespace

std::string encode(frame_kind kind, uint64_t tag, const std::string& payload) {
  std::string out;
  out.reserve(header_bytes + payload.size());
  put_be(out, payload.size(), 4);
  out.push_back(static_cast<char>(kind));
  put_be(out, tag, 8);
  out += payload;
  return out;
}

std::string encode_attempt(uint64_t tag, const call_request& req) {
  auto copy = req;
  copy.stream_to = nullptr;
  bool streamed = static_cast<bool>(req.stream_to);
  return encode(frame_kind::attempt, tag, serialized([&](auto& sink) {
                  return inspect_attempt(sink, copy, streamed);
                }));
}

std::string encode_reply(uint64_t tag, const source_reply& reply) {
  auto copy = reply;
  return encode(frame_kind::reply, tag,
                serialized([&](auto& sink) { return inspect(sink, copy); }));
}

std::optional<call_request> decode_attempt(const std::string& payload,
                                           bool& streamed) {
  // Strings are range-checked against what is left of the payload before
  // they are allocated (CAF's binary_deserializer): nothing here outgrows
  // the frame, itself within `max_remote_frame_bytes`.
  caf::binary_deserializer source{nullptr, payload.data(), payload.size()};
  call_request req;
  streamed = false;
  if (inspect_attempt(source, req, streamed) || source.remaining() != 0)
    return std::nullopt;
  if (req.headers.size() > max_call_headers)
    return std::nullopt;
  return req;
}

std::optional<source_reply> decode_reply(const std::string& payload) {
  caf::binary_deserializer source{nullptr, payload.data(), payload.size()};
  source_reply reply;
  if (inspect(source, reply) || source.remaining() != 0)
    return std::nullopt;
  return reply;
}

size_t frame_decoder::step(const char* data, size_t n) {
  if (header_filled_ < header_bytes) {
    auto take = std::min(n, header_bytes - header_filled_);
    std::copy_n(reinterpret_cast<const unsigned char*>(data), take,
                header_.begin() + header_filled_);
    header_filled_ += take;
    if (header_filled_ < header_bytes)
      return take;
    // The header is whole: checked before the payload gets any memory.
    want_ = static_cast<size_t>(get_be(header_.data(), 4));
    auto kind = header_[4];
    if (kind < static_cast<uint8_t>(frame_kind::attempt) ||
        kind > static_cast<uint8_t>(frame_kind::heartbeat)) {
      error_ = "unknown frame kind";
      return take;
    }
    current_.kind = static_cast<frame_kind>(kind);
    current_.tag = get_be(header_.data() + 5, 8);
    if (want_ > max_remote_frame_bytes) {
      error_ = "frame longer than max_remote_frame_bytes";
      return take;
    }
    bool empty_kind = current_.kind == frame_kind::cancel ||
                      current_.kind == frame_kind::heartbeat;
    if (empty_kind && want_ != 0) {
      error_ = "payload on a frame that has none";
      return take;
    }
    // The payload grows with what arrives (at most the announced length):
    // an honest peer's frame costs what it sends, a lying one nothing more.
    if (want_ == 0) {
      header_filled_ = 0;
      ready_ = true;
    }
    return take;
  }
  auto take = std::min(n, want_ - current_.payload.size());
  current_.payload.append(data, take);
  if (current_.payload.size() == want_) {
    header_filled_ = 0;
    ready_ = true;
  }
  return take;
}

} // namespace sluice::remote_wire
