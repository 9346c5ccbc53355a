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
#include "sluice/actors/http_client.hpp"
#include "sluice/actors/io_thread.hpp"
#include "sluice/actors/io_time.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loop_scheduler.hpp"
#include "sluice/actors/upstream_connection.hpp"
#include "sluice/actors/upstream_request.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

namespace beast = boost::beast;
namespace net = boost::asio;

using upstream::is_host_char;
using upstream::log_label;
using upstream::parse_url;

std::string upstream_target(std::string_view base_path,
                            std::string_view route) {
  // Segments are what lies between slashes: "/a/b" holds "a" and "b".
  auto segments = [](std::string_view path) {
    std::vector<std::string_view> out;
    while (!path.empty() && path.front() == '/') {
      path.remove_prefix(1);
      auto end = std::min(path.find('/'), path.size());
      out.push_back(path.substr(0, end));
      path.remove_prefix(end);
    }
    return out;
  };
  auto base = segments(base_path);
  auto head = segments(route);
  std::string out{base_path};
  if (route.empty() || route.front() != '/' || head.size() < 2) {
    out += route;
    return out;
  }
  for (auto k = std::min(base.size(), head.size() - 1); k > 0; --k)
    if (std::equal(base.end() - k, base.end(), head.begin())) {
      // Skip the route's first k segments, each with its leading '/'.
      size_t skip = 0;
      for (size_t i = 0; i < k; ++i)
        skip += 1 + head[i].size();
      out += route.substr(skip);
      return out;
    }
  out += route;
  return out;
}

void validate(const http_source_config& cfg) {
  std::string why;
  if (!parse_url(cfg.base_url, why))
    throw field_error("base_url", why + " (got '" + cfg.base_url + "')");
  for (auto& [name, value] : cfg.headers)
    if (value.compare(0, 4, "env:") == 0 &&
        std::getenv(value.substr(4).c_str()) == nullptr)
      throw field_error("headers." + name, "environment variable " +
                                               value.substr(4) + " is not set");
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

using http_done_atom = caf::atom_constant<caf::atom("httpdone")>;

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

/// Where a source's attempts run. On the loop scheduler (sluice-node): a
/// client per loop, built when the loop first runs one of the source's
/// attempts, so an attempt runs on the loop its source actor runs it on
/// (the loop the call's governor woke it on, when it was idle) and the
/// source owns no thread. Under any other scheduler: one client on a loop
/// of its own (`http_io`).
struct http_source_state {
  caf::actor_system* sys = nullptr;
  http_source_config cfg;
  loop_scheduler* loops = nullptr;
  std::vector<std::unique_ptr<upstream::http_client>> per_loop;
  std::unique_ptr<http_io> io;
  std::shared_ptr<http_source_stats> stats;
  uint64_t next_id = 1;
  attempt_book<pending> attempts;

  ~http_source_state() {
    per_loop.clear(); // each closes its exchanges on its loop
    http_io::dispose(std::move(io));
  }

  size_t lanes() const noexcept { return loops ? per_loop.size() : 1; }

  /// A new attempt's id, on `lane` (the lane is `id % lanes()`).
  uint64_t new_id(size_t lane) noexcept { return next_id++ * lanes() + lane; }

  /// The lane of the calling thread: its loop, or 0.
  size_t current_lane() const noexcept {
    if (!loops)
      return 0;
    auto i = loops->current_index();
    return i < per_loop.size() ? i : 0; // not on a loop: the first one
  }

  /// The client of attempt `id`, if it was built.
  upstream::http_client* client_of(uint64_t id) const noexcept {
    if (loops)
      return per_loop[id % per_loop.size()].get();
    return io ? io->client.get() : nullptr;
  }

  /// The client of `lane`, built now if it is not yet (its first build
  /// failed: no descriptor or thread to spare then); null if it still
  /// cannot be.
  upstream::http_client* ensure_engine(size_t lane) noexcept {
    if (loops) {
      auto& c = per_loop[lane];
      if (!c) {
        try {
          c = std::make_unique<upstream::http_client>(
              loops->loop(lane), upstream::real_io_time(), cfg, stats,
              loops->life(lane));
        } catch (const std::exception& e) {
          static log_limit lim;
          log_limited(lim, spdlog::level::err,
                      "http source {}: cannot start its I/O on loop {}: {}",
                      cfg.base_url, lane, e.what());
        }
      }
      return c.get();
    }
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
                                std::shared_ptr<http_source_stats> stats) {
  self->state.sys = &self->system();
  self->state.cfg = std::move(cfg);
  self->state.stats = stats;
  if (auto* loops = loop_scheduler::of(self->system())) {
    self->state.loops = loops;
    self->state.per_loop.resize(loops->loops());
  } else {
    self->state.ensure_engine(0); // now, not at the first call (io_thread)
  }
  // A requester that terminated, or sent `cancel_atom`, cancelled its
  // attempts: close them upstream.
  auto drop = [self](const caf::actor_addr& requester) {
    auto& st = self->state;
    for (auto id : st.attempts.drop_requester(requester)) {
      try {
        if (auto* client = st.client_of(id))
          client->cancel(id);
      } catch (const std::exception& e) {
        static log_limit lim;
        log_limited(lim, spdlog::level::warn,
                    "http source {}: cancelling an attempt failed: {}",
                    st.cfg.base_url, e.what());
      }
      --st.stats->in_flight;
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
        auto lane = st.current_lane();
        auto engine = st.ensure_engine(lane);
        if (!engine)
          return cannot_attempt();
        ++st.stats->in_flight;
        auto id = st.new_id(lane);
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto promise = self->make_response_promise();
        st.attempts.add(self, id, pending{promise, requester});
        // Weak: an answer in flight never keeps the source alive, so the
        // I/O thread never drops its last reference (an actor destroyed
        // there, while its actor system shuts down, read a dead clock).
        auto me = caf::actor_cast<caf::actor_addr>(self);
        try {
          engine->start(id, req, [me, id](source_reply r) {
            // On the I/O thread: hand the answer to the actor, if it lives.
            if (auto strong = caf::actor_cast<caf::actor>(me))
              caf::anon_send(strong, http_done_atom::value, id, std::move(r));
          });
        } catch (const std::exception& e) {
          static log_limit lim;
          log_limited(lim, spdlog::level::warn,
                      "http source {}: starting an attempt failed: {}",
                      st.cfg.base_url, e.what());
          if (auto p = st.attempts.take(self, id)) {
            --st.stats->in_flight;
            p->promise.deliver(cannot_attempt());
          }
        }
        return caf::delegated<source_reply>{};
      },
      [self](http_done_atom, uint64_t id, source_reply& r) {
        auto& st = self->state;
        auto p = st.attempts.take(self, id);
        if (!p)
          return; // cancelled meanwhile
        --st.stats->in_flight;
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
  auto a = sys.spawn(http_source_actor, std::move(cfg), stats);
  return {caf::actor_cast<source_actor>(a), std::move(stats), tls, verify};
}

} // namespace sluice
