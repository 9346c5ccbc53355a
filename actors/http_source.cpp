#include "sluice/actors/http_source.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/error.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "sluice/actors/attempt_book.hpp"
#include "sluice/actors/upstream/http_client.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/loops/io_time.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/actors/upstream/connection.hpp"
#include "sluice/actors/upstream/request.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

namespace beast = boost::beast;
namespace net = boost::asio;

using upstream::is_host_char;
using upstream::log_label;
using upstream::parse_url;

void validate(const http_source_config& cfg) {
  std::string why;
  if (!parse_url(cfg.base_url, why))
    throw field_error("base_url", why + " (got '" + cfg.base_url + "')");
  for (auto& [name, value] : cfg.headers)
    if (value.compare(0, 4, "env:") == 0 &&
        std::getenv(value.substr(4).c_str()) == nullptr)
      throw field_error("headers." + name, "environment variable " +
                                               value.substr(4) + " is not set");
  policy::validate(cfg.statuses);
  if (cfg.connect_timeout <= duration::zero())
    throw field_error("connect_timeout", "must be positive");
  if (cfg.first_byte_timeout <= duration::zero())
    throw field_error("first_byte_timeout", "must be positive");
  if (cfg.idle_timeout <= duration::zero())
    throw field_error("idle_timeout", "must be positive");
  if (cfg.response_timeout <= duration::zero())
    throw field_error("response_timeout", "must be positive");
  if (cfg.max_body_bytes == 0)
    throw field_error("max_body_bytes", "must be positive");
  if (cfg.max_error_body_bytes == 0)
    throw field_error("max_error_body_bytes", "must be positive");
  if (cfg.tls && !parse_url(cfg.base_url, why)->https)
    throw field_error("tls", "TLS settings need an https:// base_url (got '" +
                                 cfg.base_url + "')");
  if (cfg.tls) {
    try {
      validate(*cfg.tls);
    } catch (const field_error& e) {
      throw field_error("tls." + e.field(), e.problem());
    }
  }
}

void validate(const http_tls_config& cfg) {
  if (!cfg.server_name.empty()) {
    beast::error_code not_an_address;
    net::ip::make_address(cfg.server_name, not_an_address);
    auto& name = cfg.server_name;
    if (not_an_address && !std::all_of(name.begin(), name.end(), is_host_char))
      throw field_error("server_name",
                        "a host name (letters, digits, '-', '.', '_') or an "
                        "IP address");
  }
  upstream::make_tls_context(cfg); // checks the files, then is dropped
}

namespace {

// -- the source actor
// ----------------------------------------------------------

struct pending {
  caf::response_promise promise;
  caf::actor_addr requester;
};

/// A source's I/O: a loop on a thread of its own and the client on it. The
/// loop stops before the client goes, so none of the client's handlers runs
/// during or after its destruction.
struct http_io {
  std::unique_ptr<upstream::io_thread> thread;
  std::unique_ptr<upstream::http_client> client;

  ~http_io() {
    thread->stop();
    client.reset();
  }

  /// Destroys `io`. Usually on a CAF thread; but when a handler drops the
  /// last reference to the source actor (an answer's callback holds one for
  /// its send), the actor goes on the loop's own thread, which cannot join
  /// itself: a helper thread does it once that handler has returned.
  static void dispose(std::unique_ptr<http_io> io) {
    if (io && io->thread->on_thread()) {
      std::thread{[io = std::move(io)]() mutable { io.reset(); }}.detach();
      return;
    }
    io.reset();
  }
};

/// A source's clients on the loop scheduler: one per loop, built on that
/// loop's thread when it first runs one of the source's attempts, so the
/// source owns no thread. Attempts come from the source's actor (on the
/// loop it runs on) or, directly, from a governor (on its own loop: the
/// call's). Attempt ids carry their lane (`id % lanes`), for the cancel.
///
/// A lane's client is built and used on its loop's thread only; `cancel`
/// (any thread) reads the published pointer and posts to the loop. The
/// clients go with the lanes, when the actor's state and the last attempt
/// being started have dropped them (each closes its exchanges on its loop,
/// answering them `transient`).
class http_lanes final : public direct_attempts {
public:
  http_lanes(loop_scheduler& loops, http_source_config cfg,
             std::shared_ptr<http_source_stats> stats)
      : loops_(loops)
      , cfg_(std::move(cfg))
      , stats_(std::move(stats))
      , lanes_(loops.loops()) {
    // nop
  }

  /// The lane of the calling thread, if it runs one of our loops.
  std::optional<size_t> here() const noexcept {
    auto i = loops_.current_index();
    if (i < lanes_.size())
      return i;
    return std::nullopt;
  }

  /// Lane `i`'s client, built now if it is not yet (its first build failed:
  /// no descriptor to spare then); null if it still cannot be. On lane
  /// `i`'s thread.
  upstream::http_client* client(size_t i) noexcept {
    auto& l = lanes_[i];
    if (auto* c = l.client.load(std::memory_order_relaxed))
      return c;
    try {
      l.owned = std::make_unique<upstream::http_client>(
          loops_.loop(i), upstream::real_io_time(), cfg_, stats_,
          loops_.life(i));
      l.client.store(l.owned.get(), std::memory_order_release);
    } catch (const std::exception& e) {
      static log_limit lim;
      log_limited(lim, spdlog::level::err,
                  "http source {}: cannot start its I/O on loop {}: {}",
                  cfg_.base_url, i, e.what());
    }
    return l.owned.get();
  }

  /// A new attempt id on lane `i`.
  uint64_t new_id(size_t i) noexcept {
    auto n = lanes_[i].next.fetch_add(1, std::memory_order_relaxed);
    return n * lanes_.size() + i;
  }

  uint64_t start(call_request& req, done_fn done) override {
    auto lane = here();
    if (!lane)
      return 0;
    auto* engine = client(*lane);
    if (engine == nullptr)
      return 0;
    auto id = new_id(*lane);
    ++stats_->attempts;
    ++stats_->direct_attempts;
    // Only making the exchange, or its post, can throw (no memory): the
    // caller answers it.
    engine->start(id, std::move(req), std::move(done));
    return id;
  }

  void cancel(uint64_t id) noexcept override {
    auto& l = lanes_[id % lanes_.size()];
    auto* c = l.client.load(std::memory_order_acquire);
    if (c == nullptr)
      return;
    try {
      c->cancel(id);
    } catch (const std::exception& e) {
      static log_limit lim;
      log_limited(lim, spdlog::level::warn,
                  "http source {}: cancelling an attempt failed: {}",
                  cfg_.base_url, e.what());
    }
  }

private:
  struct lane {
    /// Going with the lanes, it closes its exchanges on its loop.
    std::unique_ptr<upstream::http_client> owned;
    /// `owned`, once built (read by `cancel` from any thread).
    std::atomic<upstream::http_client*> client{nullptr};
    /// Ids are 1, 2, ... per lane (0 is "not started").
    std::atomic<uint64_t> next{1};
  };

  loop_scheduler& loops_;
  http_source_config cfg_;
  std::shared_ptr<http_source_stats> stats_;
  std::vector<lane> lanes_;
};

/// Where a source's attempts run: on the loop scheduler (sluice-node), its
/// lanes (`http_lanes`), shared with the governors that start attempts
/// themselves; under any other scheduler, one client on a loop of its own
/// (`http_io`).
struct http_source_state {
  caf::actor_system* sys = nullptr;
  http_source_config cfg;
  std::shared_ptr<http_lanes> lanes;
  std::unique_ptr<http_io> io;
  std::shared_ptr<http_source_stats> stats;
  uint64_t next_id = 1;
  attempt_book<pending> attempts;

  ~http_source_state() {
    lanes.reset(); // the lanes close their exchanges on their loops
    http_io::dispose(std::move(io));
  }

  /// The I/O thread's client, if it was started (no loops).
  upstream::http_client* io_client() const noexcept {
    return io ? io->client.get() : nullptr;
  }

  /// The I/O thread's client, started now if it is not yet (its first
  /// start failed: no descriptor or thread to spare then); null if it
  /// still cannot be.
  upstream::http_client* ensure_io() noexcept {
    if (io)
      return io->client.get();
    try {
      auto thread = std::make_unique<upstream::io_thread>(
          *sys, "http source " + log_label(cfg));
      auto client = std::make_unique<upstream::http_client>(
          thread->loop(), upstream::real_io_time(), cfg, stats);
      thread->start();
      auto next = std::make_unique<http_io>();
      next->thread = std::move(thread);
      next->client = std::move(client);
      io = std::move(next);
    } catch (const std::exception& e) {
      static log_limit lim;
      log_limited(lim, spdlog::level::err,
                  "http source {}: cannot start its I/O: {}", cfg.base_url,
                  e.what());
    }
    return io ? io->client.get() : nullptr;
  }

  /// Where the actor runs attempt `id`'s engine; and the new attempt's id.
  /// On the loops: the lane of the loop the actor runs on now (the first,
  /// should it run elsewhere).
  std::pair<upstream::http_client*, uint64_t> engine_for_attempt() noexcept {
    if (lanes) {
      auto lane = lanes->here().value_or(0);
      return {lanes->client(lane), lanes->new_id(lane)};
    }
    return {ensure_io(), next_id++};
  }

  void cancel(uint64_t id) {
    if (lanes) {
      lanes->cancel(id);
      return;
    }
    if (auto* c = io_client())
      c->cancel(id);
  }

  static inline const char* name = "sluice.http_source";
};

using http_actor = caf::stateful_actor<http_source_state>;

source_reply cannot_attempt() {
  source_reply r;
  r.kind = policy::outcome_kind::transient;
  r.body = R"({"error":"upstream unreachable"})";
  return r;
}

caf::behavior http_source_actor(http_actor* self, http_source_config cfg,
                                std::shared_ptr<http_source_stats> stats,
                                std::shared_ptr<http_lanes> lanes) {
  self->state.sys = &self->system();
  self->state.cfg = std::move(cfg);
  self->state.stats = stats;
  self->state.lanes = std::move(lanes);
  if (!self->state.lanes)
    self->state.ensure_io(); // now, not at the first call (io_thread)
  // A requester that terminated, or sent `cancel_atom`, cancelled its
  // attempts: close them upstream.
  auto drop = [self](const caf::actor_addr& requester) {
    auto& st = self->state;
    for (auto id : st.attempts.drop_requester(requester)) {
      try {
        st.cancel(id);
      } catch (const std::exception& e) {
        static log_limit lim;
        log_limited(lim, spdlog::level::warn,
                    "http source {}: cancelling an attempt failed: {}",
                    st.cfg.base_url, e.what());
      }
    }
  };
  self->set_down_handler([drop](caf::down_msg& dm) { drop(dm.source); });
  return {
      [self, drop](cancel_atom) {
        drop(caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [self](attempt_atom,
             const call_request& req) -> caf::result<source_reply> {
        auto& st = self->state;
        ++st.stats->attempts;
        auto [engine, id] = st.engine_for_attempt();
        if (!engine)
          return cannot_attempt();
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto promise = self->make_response_promise();
        st.attempts.add(self, id, pending{promise, requester});
        // Weak: an answer in flight never keeps the source alive, so the
        // I/O thread never drops its last reference (an actor destroyed
        // there, while its actor system shuts down, read a dead clock).
        auto me = caf::actor_cast<caf::actor_addr>(self);
        try {
          engine->start(id, req, [me, id = id](source_reply r) {
            // On the I/O thread: hand the answer to the actor, if it lives.
            if (auto strong = caf::actor_cast<caf::actor>(me))
              caf::anon_send(strong, http_done_atom_v, id, std::move(r));
          });
        } catch (const std::exception& e) {
          static log_limit lim;
          log_limited(lim, spdlog::level::warn,
                      "http source {}: starting an attempt failed: {}",
                      st.cfg.base_url, e.what());
          if (auto p = st.attempts.take(self, id))
            p->promise.deliver(cannot_attempt());
        }
        return caf::delegated<source_reply>{};
      },
      [self](http_done_atom, uint64_t id, source_reply& r) {
        auto& st = self->state;
        auto p = st.attempts.take(self, id);
        if (!p)
          return; // cancelled meanwhile
        p->promise.deliver(std::move(r));
      },
  };
}

} // namespace

http_source spawn_http_source(caf::actor_system& sys, http_source_config cfg) {
  validate(cfg);
  std::string why;
  bool tls = parse_url(cfg.base_url, why)->https;
  bool verify = !cfg.tls || cfg.tls->verify;
  // At start, once per source, on the caller's thread: not rate-limited.
  if (!verify)
    logger().warn("http source {}: tls.verify = false: the upstream's "
                  "certificate is NOT checked; anyone on the path can read "
                  "and change this source's traffic",
                  log_label(cfg));
  auto stats = std::make_shared<http_source_stats>();
  std::shared_ptr<http_lanes> lanes;
  if (auto* loops = loop_scheduler::of(sys))
    lanes = std::make_shared<http_lanes>(*loops, cfg, stats);
  std::weak_ptr<direct_attempts> direct = lanes;
  auto a = sys.spawn(http_source_actor, std::move(cfg), stats,
                     std::move(lanes));
  return {caf::actor_cast<source_actor>(a), std::move(stats), tls, verify,
          std::move(direct)};
}

} // namespace sluice
