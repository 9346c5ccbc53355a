#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/runtime/policy/redis_health.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/redis/clock.hpp"
#include "sluice/runtime/redis/config.hpp"

struct redisContext;
struct timeval;

namespace caf {
class actor_system;
} // namespace caf

namespace sluice {

/// A duration as hiredis wants its timeouts.
timeval to_timeval(duration d);

/// A fresh random name for this node in what it writes to Redis (lease
/// ids, pub/sub messages): never the same across restarts.
std::string random_node_id();

/// One answer from Redis, flattened: what the scripts here return.
struct redis_reply {
  enum class kind : uint8_t { nil, integer, string, array, status };
  kind type = kind::nil;
  int64_t integer = 0;
  /// For string and status answers.
  std::string text;
  std::vector<redis_reply> elements;
};

/// A blocking Redis connection with timeouts (hiredis), the one client every
/// Redis user here goes through. Not thread-safe: one owner at a time -- in
/// Sluice, a worker thread or a listener -- except `interrupt`.
///
/// Any failure (refused, timed out, a protocol or server error) returns an
/// error text and drops the connection; the next command reconnects, but
/// not before `reconnect_after` has passed since a failed connect.
///
/// A deadline (`set_deadline`) bounds every command further: each waits at
/// most the command timeout and at most until the deadline, and one whose
/// deadline has passed is not sent at all.
///
/// Deadlines and the reconnect pause are on `clock` (the steady clock when
/// none is given); the socket timeouts hiredis sets are real time.
class redis_client {
public:
  explicit redis_client(redis_config cfg,
                        std::shared_ptr<redis_clock> clock = nullptr);
  ~redis_client();

  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  struct result {
    std::optional<redis_reply> reply;
    /// Set when there is no reply: why.
    std::string error;
    /// The connection failed (refused, closed, no answer within the command
    /// timeout): Redis may be down. Not set for an error answer, nor for a
    /// command not sent because of the deadline, nor for one the deadline
    /// left less than half a command timeout that went unanswered.
    bool fault = false;

    bool ok() const noexcept { return reply.has_value(); }
  };

  /// Runs one command, e.g. `{"SET", key, value}`.
  result command(const std::vector<std::string>& argv);

  /// Runs a Lua script by its SHA1 (`EVALSHA`), loading it first if the
  /// server does not know it (after a restart, `NOSCRIPT`).
  result eval(const std::string& script, const std::vector<std::string>& keys,
              const std::vector<std::string>& args);

  /// Subscribes this connection to `channel` (connecting first if need
  /// be); from then on it only waits for messages (`next_message`).
  result subscribe(const std::string& channel);

  /// Waits, without a timeout (messages may be minutes apart; TCP
  /// keepalive notices a peer that vanished), for the next message on the
  /// subscribed channel and returns its payload; nothing when the
  /// connection closed or was interrupted (it is dropped then: `subscribe`
  /// again). A payload longer than `max_bytes` is skipped, not copied.
  std::optional<std::string> next_message(size_t max_bytes);

  /// From any thread: wakes a `next_message` that waits, and makes every
  /// later command and subscription fail, for good.
  void interrupt();

  /// The key with the configured prefix.
  std::string key(const std::string& name) const {
    return cfg_.key_prefix + name;
  }

  bool connected() const noexcept { return ctx_ != nullptr; }

  const redis_config& config() const noexcept { return cfg_; }

  /// The clock its deadlines and reconnect pause are on.
  redis_clock& clock() const noexcept { return *clock_; }

  /// Bounds the commands from now on by `deadline` (on `clock()`) as well
  /// (nothing: only by the command timeout).
  void set_deadline(std::optional<steady::time_point> deadline) noexcept {
    deadline_ = deadline;
  }

  /// How many commands failed with a fault so far, and the last one's text.
  uint64_t faults() const noexcept { return faults_; }
  const std::string& last_fault() const noexcept { return last_fault_; }

private:
  bool ensure_connected(result& r);
  void drop();
  result run(const std::vector<std::string>& argv);
  void note_fault(result& r);

  redis_config cfg_;
  std::shared_ptr<redis_clock> clock_;
  /// Guards `ctx_`'s existence against `interrupt` from another thread (its
  /// use needs no lock: one owner).
  std::mutex ctx_mx_;
  redisContext* ctx_ = nullptr;
  bool interrupted_ = false;
  std::optional<steady::time_point> deadline_;
  /// The socket timeout set on `ctx_` now (setting it costs two syscalls).
  duration applied_timeout_{};
  uint64_t faults_ = 0;
  std::string last_fault_;
  policy::reconnect_pause reconnect_pause_;
  /// Scripts by text: their SHA1 once loaded.
  std::vector<std::pair<std::string, std::string>> shas_;
};

/// One Redis connection on a thread of its own, for the call path, where a
/// frozen or slow Redis must cost a call at most one command timeout:
/// - a job runs with a deadline, the earlier of its caller's and one
///   command timeout after it starts; a job whose deadline passed while it
///   was queued is not run: it fails at once;
/// - a fault (no answer in time, a connection refused or closed) marks
///   Redis *down*: the queued jobs fail at once, and so does every job
///   submitted while it is down, without queueing. Meanwhile the worker
///   sends PING every `reconnect_after`; the first answer marks it up.
/// Down and up are logged once per transition, never per command.
class redis_worker {
public:
  /// Runs on the worker's thread, with the connection (its commands bounded
  /// by the job's deadline). Should not throw; if it does, it is dropped.
  using job = std::function<void(redis_client&)>;

  /// Called instead of a job that does not run, with the reason.
  using refusal = std::function<void(const std::string& why)>;

  /// How the reason of a job refused because Redis is down begins (the
  /// others say it is too slow).
  static constexpr std::string_view down_refusal = "redis down";

  /// `what` names its user in the log ("scope backend", "cluster tier").
  /// With `sys`, the thread counts as running in that actor system
  /// (`system_hold`) until it ends: its jobs answer actors, and one may
  /// drop an actor's last reference there. Job deadlines, the PING pause
  /// and the connection's reconnect pause are on `clock` (the steady clock
  /// when none is given); the thread holds it until it ends.
  redis_worker(redis_config cfg, std::string what,
               caf::actor_system* sys = nullptr,
               std::shared_ptr<redis_clock> clock = nullptr);

  /// Stops the thread and joins it: waits for the command in flight (at
  /// most one command timeout). Queued jobs are dropped, neither run nor
  /// refused. On the worker's own thread (a job's answer dropped the last
  /// reference to the actor owning this worker) it cannot join: the thread
  /// is detached and ends by itself, holding what its loop uses.
  ~redis_worker();

  redis_worker(const redis_worker&) = delete;
  redis_worker& operator=(const redis_worker&) = delete;

  /// Queues `run`, to start before `deadline` (on `clock()`). Exactly one of
  /// `run` and `fail` is called, on the worker's thread -- or `fail` at
  /// once, on the caller's, while Redis is down or the queue is full.
  void submit(steady::time_point deadline, job run, refusal fail);

  /// Whether Redis is down now (jobs fail at once until a PING answers).
  bool down() const noexcept;

  const redis_config& config() const noexcept;

  /// The clock its deadlines are on.
  redis_clock& clock() const noexcept;

  /// The connection jobs are given, for objects built over it (a
  /// `lease_pool`); use it only from jobs, on the worker's thread.
  redis_client& connection() noexcept;

private:
  /// What the thread uses: shared by the worker and its thread, so that it
  /// outlives a worker destroyed on that thread.
  struct core;
  std::shared_ptr<core> core_;
  std::thread thread_;
};

} // namespace sluice
