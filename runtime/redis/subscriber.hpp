#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <caf/fwd.hpp>

#include "sluice/runtime/redis/client.hpp"

namespace sluice {

/// A blocking SUBSCRIBE to one channel, on a connection and thread of its
/// own (hiredis blocks), that hands every message to a handler and
/// subscribes again -- after `reconnect_after` -- whenever the connection
/// fails or Redis closes it. Stopped by interrupting its connection, which
/// wakes the blocked read. Used by the breaker relay (transitions) and the
/// cluster tier's lease store (release notices).
///
/// The thread holds the subscriber too: a handler may drop the last
/// reference to whatever owns it, whose destructor (on this very thread)
/// then stops it -- it detaches instead of joining itself.
class redis_subscriber : public std::enable_shared_from_this<redis_subscriber> {
public:
  struct handlers {
    /// Each message's payload (at most `max_bytes`; longer ones are
    /// skipped unread). Anything it throws is caught and counted as an
    /// error.
    std::function<void(const std::string&)> message;
    /// After each successful (re)subscription, before its first message:
    /// the moment to read what was missed while unsubscribed.
    std::function<void()> subscribed;
    /// A subscription failed or was dropped while not stopping.
    std::function<void()> error;
  };

  /// Starts the thread. With `sys`, the thread counts as running in that
  /// actor system while it runs (see `system_hold`): handlers send to its
  /// actors.
  static std::shared_ptr<redis_subscriber> start(caf::actor_system* sys,
                                                 redis_config cfg,
                                                 std::string channel,
                                                 size_t max_bytes, handlers h);

  /// Stops listening and joins the thread (detaches it on the thread
  /// itself); idempotent.
  void stop();

  ~redis_subscriber();

  redis_subscriber(const redis_subscriber&) = delete;
  redis_subscriber& operator=(const redis_subscriber&) = delete;

  /// Use `start`.
  redis_subscriber(caf::actor_system* sys, redis_config cfg,
                   std::string channel, size_t max_bytes, handlers h);

private:
  void run();
  bool stopping();
  void pause();
  void deliver(const std::string& payload) noexcept;
  void notify(const std::function<void()>& f) noexcept;

  struct hold;
  /// First, so released last (see `system_hold`).
  std::unique_ptr<hold> hold_;
  redis_client client_;
  duration pause_;
  std::string channel_;
  size_t max_bytes_;
  handlers handlers_;
  std::mutex mx_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace sluice
