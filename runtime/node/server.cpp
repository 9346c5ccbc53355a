// The HTTP front's server side: its start (binding and accepting in
// node/listener.cpp), the I/O threads, the /events relay and pings, and the
// graceful stop. `http_front` is its facade.

#include "sluice/runtime/config_reload.hpp"
#include "sluice/runtime/http_front.hpp"
#include "sluice/runtime/runtime.hpp"

#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/post.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/actors/loops/system_hold.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/breaker.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/node/connection.hpp"
#include "sluice/runtime/node/fd_limit.hpp"
#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/node/listener.hpp"
#include "sluice/runtime/node/mcp_report.hpp"
#include "sluice/runtime/node/start_rules.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using node::front_state;

/// After the grace period: how long the 503s to cut-off calls may take to
/// be written before the I/O threads stop.
constexpr auto cutoff_flush_time = std::chrono::seconds{1};

/// On shared loops, how long closing every connection may take at shutdown,
/// and then each loop's last no-op.
constexpr auto loop_close_time = std::chrono::milliseconds{5000};
constexpr auto loop_barrier_time = std::chrono::milliseconds{1000};

/// The front's I/O threads hold call handles (governors): a connection
/// destroyed there may drop an actor's last reference, and CAF then cleans
/// the actor up on that thread. The front counts as running in the actor
/// system (`system_hold`) until all of it -- threads joined, the io_context
/// and every handler and connection it held -- is gone: a base before
/// `front_state`, so released after it.
struct front_hold {
  explicit front_hold(runtime& rt) { hold.emplace(rt.system()); }
  /// Reset when a shutdown leaves the front's state allocated (below): the
  /// system must not wait for what will never be freed.
  std::optional<system_hold> hold;
};

namespace {

/// The loops of `rt`'s actor system, when it runs on the loop scheduler.
std::vector<net::io_context*> shared_loops_of(runtime& rt) {
  std::vector<net::io_context*> out;
  if (auto* s = loop_scheduler::of(rt.system()))
    for (size_t i = 0; i < s->loops(); ++i)
      out.push_back(&s->loop(i));
  return out;
}

} // namespace

struct http_front::impl : front_hold, front_state {
  impl(runtime& rt, const node_settings& s)
      : front_hold(rt)
      , front_state(rt, s, shared_loops_of(rt)) {
    // nop
  }
};

namespace {

log_limit thread_log;

/// The client connections open now (held while the caller uses them).
std::vector<std::shared_ptr<node::connection>>
live_connections(front_state& f) {
  std::vector<std::shared_ptr<node::connection>> open;
  std::lock_guard<std::mutex> guard{f.connections_mx};
  for (auto& [id, entry] : f.connections)
    if (auto c = entry.conn.lock())
      open.push_back(std::move(c));
  return open;
}

/// Runs `fn` on `loop` and waits (up to `limit`) until it has run; false if
/// it did not in time.
template <class F>
bool run_on(net::io_context& loop, F fn, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  auto ran = done->get_future();
  net::post(loop, [done, fn = std::move(fn)]() mutable {
    fn();
    done->set_value();
  });
  return ran.wait_for(limit) == std::future_status::ready;
}

/// On the shared loops, which keep running after the front: closes every
/// connection, the timers and the acceptors on their loops, and waits until
/// no handler of the front is left (the loops run each handler the closes
/// abort, then a last no-op each). False if connections remain after
/// `loop_close_time`.
bool close_on_loops(front_state& f) {
  auto until = std::chrono::steady_clock::now() + loop_close_time;
  auto left = [](auto until) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
  };
  // The listeners first, each on its loop: an accept that ran before its
  // close has registered its connection by then, so the list below has
  // every connection there will be.
  if (!run_on(
          *f.loops.front(),
          [&f] {
            boost::system::error_code ec;
            f.acceptor.close(ec);
            f.admin_acceptor.close(ec);
            f.accept_backoff.cancel();
            f.ping_timer.cancel();
          },
          left(until)))
    return false;
  for (auto& l : f.listeners)
    if (!run_on(
            *f.loops[l->index], [&l = *l] { l.close(); }, left(until)))
      return false;
  for (auto& c : live_connections(f))
    c->shut();
  {
    std::lock_guard<std::mutex> guard{f.pending_mx};
    f.pending_connections.clear();
  }
  while (f.open_connections > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (f.open_connections > 0)
    return false;
  // The aborted handlers (accepts, timers) queued before these no-ops.
  for (auto* loop : f.loops)
    if (!run_on(
            *loop, [] {}, loop_barrier_time))
      return false;
  return true;
}

void arm_ping(front_state& f) {
  f.ping_timer.expires_after(f.settings.events_ping);
  f.ping_timer.async_wait([&f](boost::system::error_code ec) {
    if (ec || f.stopping)
      return;
    // A comment for any SSE reader, in an event a browser's script sees
    // (EventSource hides comments): the dashboard's heartbeat.
    f.events.publish(": ping\nevent: ping\ndata: {}\n\n");
    arm_ping(f);
  });
}

// `s`, once the start's rules that need no network passed: before the
// front's state opens the access log, before any bind.
const node_settings& checked(const node_settings& s) {
  check_front_settings(s);
  return s;
}

} // namespace

http_front::http_front(runtime& rt, const node_settings& settings,
                       size_t threads)
    : impl_(std::make_unique<impl>(rt, checked(settings))) {
  {
    // Client connections fit under the descriptor limit with what the
    // node needs beside them: idle ones cannot take every descriptor.
    auto fd_limit = node::raise_fd_limit();
    auto admin = settings.admin_listen ? settings.admin_max_connections : 0;
    impl_->admin_cap = settings.admin_max_connections;
    impl_->client_cap = static_cast<size_t>(
        policy::connection_cap(settings.max_connections, fd_limit, admin));
    impl_->fd_reserve = fd_limit != 0 ? policy::fd_reserve(fd_limit) : 0;
    if (impl_->client_cap < settings.max_connections)
      logger().warn("client connections capped at {} (node.max_connections "
                    "{}): the descriptor limit is {}, of which {} are kept "
                    "for the node itself{}; raise it (ulimit -n) to serve "
                    "more",
                    impl_->client_cap, settings.max_connections, fd_limit,
                    impl_->fd_reserve,
                    admin != 0 ? " and " + std::to_string(admin) +
                                     " for the admin listener"
                               : std::string{});
    else // as configured: /status `limits` says it (nothing on stdout
         // before the "listening" line, which scripts read first)
      logger().debug("client connections capped at {} (node.max_connections; "
                     "descriptor limit {})",
                     impl_->client_cap, fd_limit);
  }
  // A port in use is the network's answer: --check-config cannot know it,
  // the start says which listener failed.
  try {
    node::bind_main(*impl_, settings.listen_host, settings.listen_port);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string{"node.listen: "} + e.what());
  }
  {
    boost::system::error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    impl_->main_loopback = !ec && ep.address().is_loopback();
  }
  auto& auth = settings.auth;
  // Again with the address bound: a host name's only now known.
  node::check_open_to_anyone(impl_->main_loopback, settings, auth);
  if (settings.admin_listen) {
    auto& a = *settings.admin_listen;
    try {
      node::bind_admin(*impl_, a.host, a.port);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string{"node.admin_listen: "} + e.what());
    }
    boost::system::error_code ec;
    auto ep = impl_->admin_acceptor.local_endpoint(ec);
    if (!ec && !ep.address().is_loopback())
      logger().warn("node.admin_listen {}:{} is not a loopback address: "
                    "whoever reaches it may read /status and reset "
                    "breakers without a key",
                    a.host, a.port);
  }
  if (impl_->keys()->required() && !auth.admin_digest && !settings.admin_listen)
    logger().warn("client keys are configured without auth.admin_key or "
                  "node.admin_listen: /status, /metrics, /events and "
                  "/admin/ are not served (403)");
  if (auth.allow_anonymous && !impl_->main_loopback)
    logger().warn("auth.allow_anonymous = true on {}: anyone who reaches the "
                  "node may call its upstreams",
                  settings.listen_host);
  auto* state = static_cast<front_state*>(impl_.get());
  // Every breaker transition is published on /events.
  std::vector<caf::actor> breakers;
  for (auto& s : rt.sources())
    breakers.push_back(s.breaker.actor);
  impl_->event_relay = spawn_breaker_listener(
      rt.system(), std::move(breakers), [state](const breaker_event& ev) {
        try {
          auto text = node::breaker_event_json(ev);
          state->transitions.add(text, ev.at);
          state->events.publish(node::breaker_event_frame(text));
        } catch (const std::exception& e) {
          log_limited(thread_log, spdlog::level::err,
                      "publishing a breaker event threw: {}", e.what());
        }
      });
  node::start_mcp_events(*state);
  node::start_accepting(*state);
  net::post(impl_->ping_timer.get_executor(), [state] { arm_ping(*state); });
  if (impl_->shared_loops)
    return; // the actor system's loops run it
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i)
    impl_->threads.emplace_back([state] {
      // The last line of defence: a handler that throws past its own catch
      // loses its connection, never the process.
      upstream::run_until_stopped(state->ioc, [state](const char* what) {
        ++state->counters.handler_errors;
        log_limited(thread_log, spdlog::level::err, "an I/O handler threw: {}",
                    what != nullptr ? what : "an unknown exception");
      });
    });
}

http_front::~http_front() {
  shutdown(duration::zero());
  if (impl_)
    if (auto* r = impl_->reloader.load(std::memory_order_acquire))
      r->forget(this);
}

void http_front::serve_reloads(config_reloader& reloader) {
  auto* state = static_cast<front_state*>(impl_.get());
  state->reloader.store(&reloader, std::memory_order_release);
  reloader.add_check(this, [state](const file_config& next) {
    node::check_open_to_anyone(state->main_loopback, state->settings,
                               next.node.auth);
  });
  reloader.on_applied(this, [state](const file_config& next) {
    auto old = state->keys();
    state->set_keys(std::make_shared<const node::client_keys>(
        next.node.auth, state->rt.tiers(), old.get()));
    auto old_spend = state->spend();
    state->set_spend(std::make_shared<const node::spend_book>(next.node.spend,
                                                              old_spend.get()));
    // MCP: the servers the reload left running, added or started again
    // (their state changes on /events from now on).
    node::stop_mcp_events(*state);
    state->mcp.set_servers(state->rt.mcp_servers(), next.mcp.max_sessions,
                           next.mcp.session_idle);
    node::start_mcp_events(*state);
    // /events: the listener subscribes to the breakers it does not have.
    for (auto& s : state->rt.sources())
      caf::anon_send(state->event_relay, subscribe_atom_v, s.breaker.actor);
  });
}

uint16_t http_front::port() const noexcept {
  if (!impl_)
    return 0;
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

uint16_t http_front::admin_port() const noexcept {
  boost::system::error_code ec;
  if (!impl_ || !impl_->admin_acceptor.is_open())
    return 0;
  return impl_->admin_acceptor.local_endpoint(ec).port();
}

size_t http_front::in_flight() const noexcept {
  return impl_ ? impl_->in_flight.load() : 0;
}

size_t http_front::open_connections() const noexcept {
  return impl_ ? impl_->open_connections.load() : 0;
}

size_t http_front::idle_connections() const noexcept {
  if (!impl_)
    return 0;
  std::lock_guard<std::mutex> guard{impl_->connections_mx};
  return impl_->idle_clients.size() + impl_->idle_admins.size();
}

size_t http_front::connection_cap() const noexcept {
  return impl_ ? impl_->client_cap : 0;
}

void http_front::use_clock(std::function<time_point()> now) {
  impl_->clock = std::move(now);
}

bool http_front::reopen_access_log() noexcept {
  return impl_ ? impl_->access.reopen() : true;
}

size_t http_front::shutdown(duration grace) {
  if (!impl_)
    return 0; // left behind by a shutdown that could not finish
  auto& f = *impl_;
  // A reload started by POST /admin/reload uses the front, the runtime and
  // the reloader: no new one, and the last one ends before anything goes.
  // It is joined once the calls had their grace period, so it runs within
  // that period instead of adding to it. NOTE: a reload is bounded, not
  // cut short: its files are read without ever blocking, a file being
  // written refused within ~0.3 s (config/file_snapshot.hpp); one still
  // running after the grace is waited for.
  std::thread reload;
  {
    std::lock_guard<std::mutex> guard{f.reload_mx};
    f.reloads_closed = true;
    reload = std::move(f.reload_thread);
  }
  if (f.threads.empty() && (!f.shared_loops || f.stopping)) {
    if (reload.joinable())
      reload.join();
    return 0;
  }
  assert_not_on_loop("http_front::shutdown (waits for the calls)");
  f.stopping = true;
  net::post(f.accept_strand, [&f] {
    boost::system::error_code ec;
    f.acceptor.close(ec);
    f.admin_acceptor.close(ec);
    f.accept_backoff.cancel();
  });
  node::close_loop_listeners(f);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (f.in_flight > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (reload.joinable())
    reload.join();
  size_t left = f.in_flight;
  if (left > 0) {
    // Calls cut off by the grace period are answered 503 shutting_down,
    // not reset.
    for (auto& c : live_connections(f))
      c->cut_off();
    auto flush_until = std::chrono::steady_clock::now() + cutoff_flush_time;
    while (f.cutoffs_pending > 0 &&
           std::chrono::steady_clock::now() < flush_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    logger().warn("shutdown: {} call(s) cut off by the grace period were "
                  "answered 503 shutting_down",
                  left);
  }
  stop_mcp_events(f); // the servers' views call into it too
  {
    // The relay calls into this object: wait until it is gone.
    caf::scoped_actor self{f.rt.system()};
    self->monitor(f.event_relay);
    self->send_exit(f.event_relay, caf::exit_reason::user_shutdown);
    self->receive([](const caf::down_msg&) {});
  }
  {
    // Results still on their way are dropped from here on.
    std::lock_guard<std::mutex> guard{f.gate->mx};
    f.gate->open = false;
  }
  if (f.shared_loops) {
    if (!close_on_loops(f)) {
      // Something still holds a connection or a handler of the front: the
      // front's state must outlive it. Left behind, not freed under it.
      logger().error("shutdown: {} connection(s) of the HTTP front did not "
                     "close within {} ms; their state is left allocated",
                     f.open_connections.load(), loop_close_time.count());
      // Its access log too: what it queued is written now, as the
      // destructor would have.
      f.access.flush();
      impl_->hold.reset();
      static_cast<void>(impl_.release());
    }
    return left;
  }
  f.ioc.stop();
  for (auto& t : f.threads)
    t.join();
  f.threads.clear();
  {
    // Cut-off calls: their connections go now, while the io_context exists.
    std::lock_guard<std::mutex> guard{f.pending_mx};
    f.pending_connections.clear();
  }
  return left;
}

} // namespace sluice
