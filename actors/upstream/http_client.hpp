#pragma once

// The Beast side of an HTTP source: a keep-alive pool and the exchanges in
// flight, on an Asio loop it is handed, with its timers on an injected time
// (`io_time`). Private to the HTTP source, whose actor owns one per loop of
// the loop scheduler (or one on a loop of its own, `io_thread`, under CAF's
// scheduler) and hands it each attempt; a test runs one on a loop and a
// simulated time of its own.

#include <cstdint>
#include <functional>
#include <memory>

#include "sluice/actors/upstream/http_stats.hpp"
#include "sluice/runtime/policy/source/http_settings.hpp"
#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/messages/call.hpp"

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace sluice::upstream {

class io_time;

class http_client {
public:
  // -- member types -----------------------------------------------------------

  /// Called once per attempt, on the loop's thread, with its answer (never
  /// for a cancelled attempt).
  using done_fn = std::function<void(source_reply)>;

  // -- constructors, destructors ----------------------------------------------

  /// A client whose handlers run on `loop` and whose deadlines are read
  /// from and set on `time`; both must outlive it. `cfg` is validated
  /// (`validate`). Throws when the I/O machinery cannot be built (no file
  /// descriptors).
  ///
  /// `life`: the loop's token when it may be destroyed before the client
  /// (the loop scheduler's); the client then posts its close only while the
  /// loop lives, and otherwise leaves its engine allocated (its sockets
  /// belong to the dead loop).
  http_client(boost::asio::io_context& loop, io_time& time,
              const http_source_config& cfg,
              std::shared_ptr<http_source_stats> stats,
              std::shared_ptr<loop_life> life = nullptr);

  /// From any thread, while `loop` runs or after it stopped: the attempts
  /// in flight are answered `transient` ("the source stopped") and the pool
  /// closes, on the loop (nothing is answered if the loop is gone). What
  /// the handlers still hold goes with the last of them.
  ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  // -- attempts ---------------------------------------------------------------

  /// From any thread: sends `req` upstream as attempt `id`; `done` gets its
  /// answer. Nothing happens once the loop is gone (`life`). Throws only
  /// when the post cannot be allocated.
  void start(uint64_t id, call_request req, done_fn done);

  /// From any thread: the requester is gone, so attempt `id`'s upstream
  /// request is closed now (posted after its start, whose post it follows
  /// on the loop's FIFO queue). Nothing happens once the loop is gone.
  void cancel(uint64_t id);

private:
  class engine;
  std::shared_ptr<engine> engine_;
  std::shared_ptr<loop_life> life_;
};

} // namespace sluice::upstream
