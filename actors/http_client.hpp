#pragma once

// The Beast side of an HTTP source: an I/O thread of its own, a keep-alive
// pool, the exchanges in flight. Private to the HTTP source, whose actor
// owns one and hands it each attempt.

#include <cstdint>
#include <functional>
#include <memory>

#include "sluice/actors/http_source.hpp"
#include "sluice/messages/call.hpp"

namespace caf {
class actor_system;
} // namespace caf

namespace sluice::upstream {

class http_client {
public:
  // -- member types -----------------------------------------------------------

  /// Called once per attempt, on the I/O thread, with its answer (never for
  /// a cancelled attempt).
  using done_fn = std::function<void(source_reply)>;

  // -- constructors, destructors ----------------------------------------------

  /// Starts the I/O thread. Throws when the I/O machinery cannot be built
  /// (no file descriptors, no thread): better at the source's start than at
  /// its first call. From its start until it is joined and has let go of
  /// every actor reference, the I/O thread counts as running in `sys`
  /// (`system_hold`): `sys` is not destroyed under it.
  http_client(caf::actor_system& sys, const http_source_config& cfg,
              std::shared_ptr<http_source_stats> stats);

  /// Stops and joins the I/O thread: no handler runs afterwards.
  ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  /// Destroys a client. Usually on a CAF thread; but when a handler drops
  /// the last reference to the source actor (an answer's callback holds
  /// one), the actor and its client go on the client's own I/O thread,
  /// which cannot join itself: a helper thread does it once that handler
  /// has returned.
  static void dispose(std::unique_ptr<http_client> c);

  // -- attempts ---------------------------------------------------------------

  /// Sends `req` upstream as attempt `id`; `done` gets its answer.
  void start(uint64_t id, call_request req, done_fn done);

  /// The requester is gone: closes attempt `id`'s upstream request now.
  void cancel(uint64_t id);

private:
  class engine;
  std::unique_ptr<engine> engine_;
};

} // namespace sluice::upstream
