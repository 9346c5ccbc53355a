#pragma once

// The way to one upstream MCP server, whatever carries it: a child's stdin
// and stdout (stdio_child) or Streamable HTTP (http_channel). The server's
// source actor (mcp_source) speaks JSON-RPC through this and nothing else,
// so one actor serves both transports. Everything here runs on the I/O
// loop the channel was made on.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/steady_timer.hpp>

#include "sluice/runtime/policy/mcp/retry_safety.hpp"
#include "sluice/runtime/policy/outcome.hpp"
#include "sluice/runtime/policy/time.hpp"

namespace sluice::mcp {

/// How the exchange that carried one sent message ended, when it has an
/// end of its own (an HTTP POST; a stdio write only when it was refused).
struct send_outcome {
  /// The exchange ended as it should (its answers, if any, were passed to
  /// `handlers::message` before this).
  bool ok = true;
  /// Not ok: how far the message got (`not_sent`: the server never saw it,
  /// so even a tool with effects may be tried again) and how the call that
  /// waits for it fails.
  policy::mcp::delivery delivery = policy::mcp::delivery::sent;
  policy::outcome_kind kind = policy::outcome_kind::transient;
  /// The HTTP status, if one came (0: none).
  int status = 0;
  /// A Retry-After the server gave with a 429 or 503.
  duration retry_after{};
  /// The failure in a few words, for the attempt record and the log.
  std::string reason;
  /// Not ok because the session it went to is gone (HTTP 404; the server
  /// refused the connection): the server never saw it, and `gone` follows
  /// (the owner may send it again on the next session).
  bool session_gone = false;
};

using send_done = std::function<void(send_outcome)>;

class channel {
public:
  /// Called on the loop. `message`: one JSON-RPC message from the server
  /// (its text, not yet read). `dropped`: a message over the size limit
  /// was dropped whole. `log_line`: a line of the server's log (a child's
  /// stderr). `gone`: once, when the server is gone for this channel (the
  /// child exited and was reaped, the HTTP session ended, a stop ended);
  /// `how` says how, for the log and /status. `backed_up`: asked before
  /// each read of what the server sends.
  struct handlers {
    std::function<void(std::string_view)> message;
    std::function<void(std::string_view)> log_line;
    std::function<void()> dropped;
    std::function<void(std::string how)> gone;
    /// True while the owner has more of this server's messages waiting
    /// than it will hold (`max_unread_bytes`): the channel reads no more
    /// until it is false again.
    std::function<bool()> backed_up;
  };

  explicit channel(handlers h)
      : h_(std::move(h)) {
    // nop
  }

  virtual ~channel() = default;

  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  /// Who hears of `gone` from now on (a stopping owner that waits for it;
  /// called at once if it is gone already).
  void replace_gone(std::function<void(std::string)> f) {
    if (ended_)
      f("gone");
    else
      h_.gone = std::move(f);
  }

  /// Sends one JSON-RPC message as exchange `id` (the sender's number,
  /// unique on this channel, below 2^63; `cancel` takes it). `done` (may
  /// be empty) is called once, when the exchange that carried it ended,
  /// after the answers it brought; never after `gone`. `timeout` (zero:
  /// none) bounds the whole exchange where it has one.
  virtual void send(uint64_t id, std::string text, send_done done,
                    duration timeout = duration::zero()) = 0;

  /// Drops exchange `id` (its caller gave up on it): `done` is not called.
  virtual void cancel(uint64_t) {
    // A stdio write has no exchange of its own to drop.
  }

  /// The protocol revision the server answered `initialize` with.
  virtual void negotiated(const std::string&) {
    // Only HTTP sends it again (its MCP-Protocol-Version header).
  }

  /// The session is initialized: open what carries the server's own
  /// messages (HTTP's GET stream; a child's stdout already does).
  virtual void listen() {
    // nop
  }

  /// Ends it (a child: stdin closed, SIGTERM halfway through `grace`,
  /// SIGKILL at its end; HTTP:
  /// every exchange closed, the session DELETEd within `grace`). `gone`
  /// follows. Idempotent.
  virtual void stop(std::chrono::milliseconds grace) = 0;

  /// The child's process id (-1: no process of ours).
  virtual pid_t pid() const noexcept { return -1; }

protected:
  /// Calls `go` (the next read of the server) now, or once `backed_up`
  /// says the owner caught up, looking every 5 ms: a server that writes
  /// faster than its owner reads is read no faster. `go` keeps the
  /// channel alive.
  template <class Executor>
  void when_drained(const Executor& exec, std::function<void()> go) {
    if (!h_.backed_up || !h_.backed_up())
      return go();
    auto t = std::make_shared<boost::asio::steady_timer>(
        exec, std::chrono::milliseconds{5});
    t->async_wait([this, t, go = std::move(go)](boost::system::error_code) {
      when_drained(t->get_executor(), std::move(go));
    });
  }

  /// Calls `gone` once (and no handler after it).
  void end(std::string how) {
    ended_ = true;
    auto gone = std::move(h_.gone);
    h_ = {};
    if (gone)
      gone(std::move(how));
  }

  handlers h_;
  bool ended_ = false;
};

} // namespace sluice::mcp
