#pragma once

// What the parts of the HTTP front share (internal to runtime/node/): the
// runtime, settings, counters, the connection registry and the loops.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <caf/actor.hpp>

#include "sluice/runtime/config_file.hpp"
#include "sluice/runtime/config_reload.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/node/access_log.hpp"
#include "sluice/runtime/node/client_keys.hpp"
#include "sluice/runtime/node/event_hub.hpp"
#include "sluice/runtime/node/mcp_gateway.hpp"
#include "sluice/runtime/node/metrics.hpp"
#include "sluice/runtime/node/model_list.hpp"
#include "sluice/runtime/node/shared_spend.hpp"
#include "sluice/runtime/node/spend_ledger.hpp"
#include "sluice/runtime/policy/admission/connection_cap.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/runtime.hpp"

namespace sluice::node {

class connection;

/// Counters of what the front refused or dropped, for `/status` and tests.
struct front_counters {
  /// Connections closed at once: `max_connections` were open.
  std::atomic<uint64_t> connections_refused{0};
  /// Accept failures (EMFILE, ENFILE, ...), each followed by a back-off.
  std::atomic<uint64_t> accept_errors{0};
  /// Requests answered 4xx before routing (malformed, too large, ...).
  std::atomic<uint64_t> requests_refused{0};
  /// Stream clients dropped (gone, too slow, write timed out).
  std::atomic<uint64_t> clients_dropped{0};
  /// Idle connections closed to make room for a new one at the cap.
  std::atomic<uint64_t> connections_shed{0};
  /// Exceptions caught in a handler (the connection was closed).
  std::atomic<uint64_t> handler_errors{0};
  /// On shared loops: results and chunks handed to a connection from
  /// another thread than its loop's (each a wake-up of that loop; a call
  /// that stays on its loop makes none).
  std::atomic<uint64_t> cross_loop_posts{0};
};

/// Call results arrive on actor threads and are posted to a connection's
/// strand. Once the I/O threads are stopped nothing may be posted any more:
/// the gate closes first, under its lock.
struct post_gate {
  std::mutex mx;
  bool open = true;
};

/// Loop `i`'s own listening socket (`node.accept = "reuseport"`, loops 1
/// to N-1; loop 0's is `front_state::acceptor`), with the back-off of its
/// accepts when descriptors run out.
struct loop_listener {
  loop_listener(boost::asio::io_context& loop, size_t index)
      : acceptor(loop)
      , backoff(loop)
      , index(index) {
    // nop
  }
  /// On its loop: stops accepting (and the back-off's restart).
  void close() noexcept {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    backoff.cancel();
  }
  boost::asio::ip::tcp::acceptor acceptor;
  boost::asio::steady_timer backoff;
  size_t index;
};

struct front_state {
  /// `shared`: the loops of the actor system's loop scheduler, which the
  /// front then runs on (no thread of its own); empty: the front runs its
  /// own `ioc` on threads of its own.
  front_state(runtime& r, const node_settings& s,
              std::vector<boost::asio::io_context*> shared)
      : rt(r)
      , settings(s)
      , keys_now(std::make_shared<const client_keys>(s.auth, r.tiers()))
      , spend_now(std::make_shared<const spend_book>(s.spend))
      , shared_spend(r.config().redis ? std::make_shared<node::shared_spend>(
                                            *r.config().redis,
                                            r.config().spend_reservation_ttl,
                                            r.config().spend_open_when_down)
                                      : nullptr)
      , access(s.access_log)
      , mcp(r.mcp_servers(), s.mcp_max_sessions, s.mcp_session_idle)
      , events(s.max_event_subscribers)
      , shared_loops(!shared.empty())
      , loops(shared_loops ? std::move(shared)
                           : std::vector<boost::asio::io_context*>{&ioc})
      , accept_strand(boost::asio::make_strand(*loops.front()))
      , acceptor(accept_strand)
      , admin_acceptor(accept_strand)
      , accept_backoff(accept_strand)
      , ping_timer(boost::asio::make_strand(*loops.front()))
      , accepted(loops.size()) {
    // nop
  }

  /// Each loop listens itself (SO_REUSEPORT): its connections stay on it.
  bool per_loop_accept() const noexcept {
    return shared_loops && loops.size() > 1 && settings.accept == "reuseport";
  }

  /// How connections reach their loops: "reuseport", "handoff" (one
  /// listener, the loops in turn) or "single" (one loop, or the front's
  /// own threads).
  const char* accept_mode() const noexcept {
    if (!shared_loops || loops.size() < 2)
      return "single";
    return per_loop_accept() ? "reuseport" : "handoff";
  }

  /// Where the next connection lives: the next loop in turn (its own
  /// thread serialises it), or a strand of the front's own `ioc`.
  boost::asio::any_io_executor next_connection_executor() {
    if (!shared_loops)
      return boost::asio::make_strand(ioc);
    auto i = next_loop.fetch_add(1, std::memory_order_relaxed);
    return loops[i % loops.size()]->get_executor();
  }

  runtime& rt;
  /// The time the front reads for its requests (a key's rate, a request's
  /// and a call's duration, the transitions' ages): the steady clock, or a
  /// test's (`http_front::use_clock`). The shutdown's waits pace real
  /// sleeps and read the steady clock.
  std::function<time_point()> clock{[] { return steady::now(); }};

  time_point now() const { return clock(); }
  node_settings settings;
  /// When the front started, Unix seconds (`created` in /v1/models).
  int64_t started_unix =
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  /// Client keys (`[auth]`) and the admin key, swapped whole by a config
  /// reload: a request reads them once and holds what it read.
  std::shared_ptr<const client_keys> keys() const {
    return std::atomic_load(&keys_now);
  }
  void set_keys(std::shared_ptr<const client_keys> k) {
    std::atomic_store(&keys_now, std::move(k));
  }
  std::shared_ptr<const client_keys> keys_now;
  /// The routes' tokens and budgets and the price table, swapped whole by
  /// a config reload (each route's counts carried over).
  std::shared_ptr<const spend_book> spend() const {
    return std::atomic_load(&spend_now);
  }
  void set_spend(std::shared_ptr<const spend_book> b) {
    std::atomic_store(&spend_now, std::move(b));
  }
  std::shared_ptr<const spend_book> spend_now;
  /// With the Redis backend: the spend limits, shared by the nodes (null:
  /// counted in this process).
  std::shared_ptr<node::shared_spend> shared_spend;
  /// Config reload (`POST /admin/reload`, /status `config`); null: not
  /// served. `reloading`: one runs now (a second is refused). The thread
  /// of the last one, joined by the next and by shutdown, which closes
  /// reloads first (`reloads_closed`); these three under `reload_mx`.
  std::atomic<config_reloader*> reloader{nullptr};
  std::atomic<bool> reloading{false};
  std::mutex reload_mx;
  std::thread reload_thread;
  bool reloads_closed = false;
  access_log access;
  /// `GET /v1/models` bodies, per routes version and key filter.
  model_list_cache model_lists;
  /// The /mcp endpoint's sessions, tools and calls (disabled without
  /// `[mcp.servers]`).
  mcp_gateway mcp;
  /// The main listener is bound to a loopback address.
  bool main_loopback = true;
  node_metrics metrics;
  event_hub events;
  /// The last breaker transitions, replayed in every /events snapshot.
  transition_log transitions;
  front_counters counters;

  /// Every open client connection: its tier (for /status) and the
  /// connection (for the shutdown cut-off). Declared before the io_context:
  /// connections still in its handlers are destroyed with it, and
  /// unregister here.
  struct connection_entry {
    tier_handle tier;
    std::weak_ptr<connection> conn;
    /// The client key of its latest request (/status names connections by
    /// it); empty: anonymous.
    std::string key;
  };
  std::mutex connections_mx;
  std::map<uint64_t, connection_entry> connections;
  /// Of those, the ones waiting for a request, oldest first, per listener:
  /// at its cap a new connection closes the oldest (`shed_idle`). Under
  /// `connections_mx` too: connections of every loop come and go in them.
  policy::idle_order<uint64_t> idle_clients;
  policy::idle_order<uint64_t> idle_admins;
  /// Client connections served at once (`policy::connection_cap`: the
  /// configured `max_connections` under the descriptor limit), and the
  /// admin listener's; set before the first accept.
  size_t client_cap = settings.max_connections;
  size_t admin_cap = settings.admin_max_connections;
  /// What the descriptor limit keeps back from client connections.
  uint64_t fd_reserve = 0;

  std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();

  /// Connections with a call (or a /status fan-out) in flight, kept alive
  /// until it is handled; cleared (while the io_context still exists) at
  /// shutdown.
  std::mutex pending_mx;
  std::set<std::shared_ptr<void>> pending_connections;

  std::atomic<size_t> in_flight{0};
  std::atomic<size_t> open_connections{0};
  /// Of those, on the admin listener (a budget of their own, so a flood of
  /// clients cannot lock the operator out).
  std::atomic<size_t> admin_connections{0};
  /// Of those, the main listeners' (against `node.max_connections`). This
  /// and `admin_connections` are reserved by the accept, before the
  /// connection exists (several loops accept at once), and given back by
  /// the connection's end.
  std::atomic<size_t> client_connections{0};
  std::atomic<uint64_t> next_connection{1};
  /// Set by shutdown: new requests are answered 503 shutting_down.
  std::atomic<bool> stopping{false};
  /// Answers still being written to calls cut off at shutdown.
  std::atomic<int> cutoffs_pending{0};

  /// Subscribes to every breaker, for /events.
  caf::actor event_relay;

  /// The front's own loop, when it does not run on the actor system's.
  boost::asio::io_context ioc;
  bool shared_loops = false;
  /// The loops connections live on: the scheduler's, or `&ioc`.
  std::vector<boost::asio::io_context*> loops;
  std::atomic<size_t> next_loop{0};
  /// The acceptor and its back-off timer share one strand.
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand;
  boost::asio::ip::tcp::acceptor acceptor;
  /// `node.admin_listen` (closed when not configured).
  boost::asio::ip::tcp::acceptor admin_acceptor;
  boost::asio::steady_timer accept_backoff;
  boost::asio::steady_timer ping_timer;
  /// Loops 1..N-1's listeners when each loop accepts (empty otherwise).
  std::vector<std::unique_ptr<loop_listener>> listeners;
  /// With per-loop listeners on a fixed port: a name held in the abstract
  /// Unix socket namespace while the front listens, so a second node
  /// started on the same address at the same moment fails (its probe
  /// bind could pass before either listens).
  std::optional<boost::asio::local::stream_protocol::socket> listen_lock;
  /// Connections accepted and served (not refused at a limit), on either
  /// listener, per loop they live on.
  std::vector<std::atomic<uint64_t>> accepted;
  std::vector<std::thread> threads;
};

} // namespace sluice::node
