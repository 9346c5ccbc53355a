#pragma once

// A streamed answer's usage on its way to the client (SPEC §12): read from
// the stream's usage chunk and, when the gateway asked for that chunk (the
// client did not), taken out again -- with the `"usage":null` the upstream
// then writes into every other chunk -- so the client gets exactly the
// stream it asked for. Pure: bytes in, bytes out.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/runtime/policy/spend/spend.hpp"

namespace sluice::node {

/// The longest part of an event held back until the rest of it comes, to
/// tell whether it is the usage chunk: beyond, the event goes on to the
/// client as it comes (and is not read).
constexpr size_t max_held_event_bytes = 64 * 1024;

/// Follows one streamed answer, piece by piece as the upstream sent it.
class stream_usage {
public:
  /// `strip`: the gateway asked for usage; its usage chunk, and the null
  /// usage of the other chunks, do not reach the client. Without it the
  /// stream passes unchanged and its usage is only read.
  explicit stream_usage(bool strip) noexcept
      : strip_(strip) {}

  /// One piece as it came; on return, what goes to the client now (empty:
  /// nothing yet). Stripping holds back the part of an event not yet
  /// complete (at most `max_held_event_bytes`) until its end arrives.
  void feed(std::string& piece);

  /// The answer ended: what is still held back, to go to the client (a
  /// last event without its blank line is read, and stripped, too).
  std::string flush();

  /// The usage the stream reported (the last usage object seen).
  const std::optional<policy::token_usage>& usage() const noexcept {
    return usage_;
  }

private:
  /// Reads one whole event; returns whether it stays in the stream (it
  /// may have been edited in place).
  bool keep_event(std::string& event);

  void start_passing();
  void keep_tail(const std::string& piece);

  bool strip_;
  /// A partial event: held back (strip) or a copy to read (no strip).
  std::string held_;
  /// The current event outgrew `max_held_event_bytes`: it passes as it
  /// comes, unread, up to its end.
  bool passing_ = false;
  /// While passing: the last two bytes that passed, where the blank line
  /// that ends the event may begin.
  std::string tail_;
  std::optional<policy::token_usage> usage_;
};

/// `event` without its top-level `"usage":null` member (and the comma
/// that separated it); unchanged when it has none. A scan that follows
/// strings and nesting, no parse.
void drop_null_usage(std::string& event_json);

} // namespace sluice::node
