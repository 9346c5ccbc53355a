// The HTTP front's server side: binding, the accept loop (with its limits
// and its back-off when descriptors run out), the I/O threads, the /events
// relay and pings, and the graceful stop. `http_front` is its facade.

#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/runtime/http_front.hpp"

#include <cerrno>
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

#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/actors/loops/system_hold.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/messages/breaker.hpp"
#include "sluice/runtime/config_error.hpp"
#include "sluice/runtime/node/connection.hpp"
#include "sluice/runtime/node/fd_limit.hpp"
#include "sluice/runtime/node/front_state.hpp"
#include "sluice/runtime/node/start_rules.hpp"
#include "sluice/runtime/node/status_report.hpp"

namespace sluice {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using node::front_state;

/// Pause before accepting again after the process ran out of descriptors
/// (accepting at once again would spin: the pending connection stays in
/// the backlog and the next accept fails the same way).
constexpr auto accept_backoff_time = std::chrono::milliseconds{100};

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

log_limit accept_log;
log_limit full_log;
log_limit thread_log;

bool resource_exhausted(const boost::system::error_code& ec) {
  return ec == net::error::no_descriptors || ec.value() == ENFILE ||
         ec == net::error::no_buffer_space || ec == net::error::no_memory;
}

// One listener: the main one, or `node.admin_listen` (`admin`).
void do_accept(front_state& f, bool admin);

tcp::acceptor& acceptor_of(front_state& f, bool admin) {
  return admin ? f.admin_acceptor : f.acceptor;
}

void accept_later(front_state& f) {
  // One back-off timer: running out of descriptors pauses both listeners.
  f.accept_backoff.expires_after(accept_backoff_time);
  f.accept_backoff.async_wait([&f](boost::system::error_code ec) {
    if (!ec && !f.stopping) {
      do_accept(f, false);
      if (f.admin_acceptor.is_open())
        do_accept(f, true);
    }
  });
}

/// The loop `socket` lives on (an index into `f.loops`; 0 for a strand of
/// the front's own io_context).
size_t loop_of(front_state& f, tcp::socket& socket) {
  auto* ctx = &net::query(socket.get_executor(), net::execution::context);
  for (size_t i = 0; i < f.loops.size(); ++i)
    if (ctx == static_cast<net::execution_context*>(f.loops[i]))
      return i;
  return 0;
}

/// A new connection: served (at its listener's cap, once the longest idle
/// connection makes room), or closed at once when the cap is reached and
/// no connection is idle.
void admit(front_state& f, bool admin, tcp::socket socket) {
  // The slot is reserved before the connection exists: listeners on
  // several loops admit at once, and a check of the count followed by the
  // connection's own increment would let each of them pass at the limit.
  auto& slots = admin ? f.admin_connections : f.client_connections;
  auto limit = admin ? f.admin_cap : f.client_cap;
  // At the cap the slot is kept while the idle connection closes on its
  // loop (over the cap by the closes under way, each of an idle one).
  auto verdict = policy::admit_connection(slots.fetch_add(1), limit);
  if (verdict == policy::admission::refuse ||
      (verdict == policy::admission::shed_idle && !node::shed_idle(f, admin))) {
    --slots;
    ++f.counters.connections_refused;
    log_limited(full_log, spdlog::level::warn,
                "closed a new connection: {} = {} are open, none idle (or "
                "closing)",
                admin ? "node.admin_max_connections" : "the connection cap",
                limit);
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  set_no_delay(socket);
  auto loop = loop_of(f, socket);
  std::shared_ptr<node::connection> c;
  try {
    c = std::make_shared<node::connection>(std::move(socket), f, admin);
  } catch (...) {
    --slots; // no connection to give it back
    throw;
  }
  ++f.accepted[loop];
  c->start();
}

void log_accept_error(front_state& f, const boost::system::error_code& ec) {
  ++f.counters.accept_errors;
  log_limited(accept_log, spdlog::level::warn,
              "accepting a connection failed: {}{} ({} open, fd limit {}); "
              "accepts paused for {} ms",
              ec.message(),
              resource_exhausted(ec) ? " (out of descriptors or memory)" : "",
              f.open_connections.load(), node::current_fd_usage().limit,
              accept_backoff_time.count());
}

// -- a listener per loop (node.accept = "reuseport") --------------------------

void accept_on_loop(front_state& f, node::loop_listener& l);

void accept_on_loop_later(front_state& f, node::loop_listener& l) {
  l.backoff.expires_after(accept_backoff_time);
  l.backoff.async_wait([&f, &l](boost::system::error_code ec) {
    if (!ec && !f.stopping)
      accept_on_loop(f, l);
  });
}

// A listener whose accepts cannot go on (no memory even for the back-off)
// is closed: the kernel then spreads new connections over the other
// loops' listeners, instead of queueing them on one nobody accepts from.
void give_up_listener(node::loop_listener& l, const char* why) noexcept {
  l.close();
  try {
    log_limited(accept_log, spdlog::level::err,
                "event loop {}'s listener closed: {}; the other loops' "
                "listeners take its connections",
                l.index, why);
  } catch (...) {
    // logging failed too
  }
}

std::string exception_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

// The connections it accepts live on its loop. Running out of descriptors
// pauses this listener (the others fail and pause the same way: the limit
// is the process's); connections the kernel hashed to it wait in its
// backlog meanwhile.
void accept_on_loop(front_state& f, node::loop_listener& l) {
  l.acceptor.async_accept([&f, &l](boost::system::error_code ec,
                                   tcp::socket socket) {
    try {
      if (f.stopping || ec == net::error::operation_aborted)
        return;
      if (ec) {
        log_accept_error(f, ec);
        if (ec == net::error::connection_aborted)
          return accept_on_loop(f, l);
        return accept_on_loop_later(f, l);
      }
      admit(f, false, std::move(socket));
      accept_on_loop(f, l);
    } catch (...) {
      ++f.counters.handler_errors;
      try {
        log_limited(accept_log, spdlog::level::err,
                    "accepting a connection threw: {}",
                    exception_text(std::current_exception()));
        accept_on_loop_later(f, l);
      } catch (...) {
        give_up_listener(l, "its accept could not be re-armed");
      }
    }
  });
}

/// Closes the per-loop listeners, each on its loop.
void close_loop_listeners(front_state& f) {
  for (auto& l : f.listeners)
    net::post(l->acceptor.get_executor(), [&l = *l] { l.close(); });
}

void on_accept(front_state& f, bool admin, boost::system::error_code ec,
               tcp::socket socket) {
  if (f.stopping || ec == net::error::operation_aborted)
    return;
  if (ec) {
    log_accept_error(f, ec);
    if (ec == net::error::connection_aborted)
      return do_accept(f, admin); // that client gave up: nothing to wait for
    // The other listener stops too until the back-off ends (its accept
    // would fail the same way): cancel it, the timer restarts both.
    boost::system::error_code ignored;
    acceptor_of(f, !admin).cancel(ignored);
    return accept_later(f);
  }
  admit(f, admin, std::move(socket));
  do_accept(f, admin);
}

void do_accept(front_state& f, bool admin) {
  // With a listener per loop, the main one's connections live on its loop
  // (the first); else they go to the loops in turn.
  acceptor_of(f, admin).async_accept(
      f.per_loop_accept() && !admin ? f.loops.front()->get_executor()
                                    : f.next_connection_executor(),
      [&f, admin](boost::system::error_code ec, tcp::socket socket) {
        try {
          on_accept(f, admin, ec, std::move(socket));
        } catch (const std::exception& e) {
          // E.g. no memory for a connection: keep accepting after a pause.
          ++f.counters.handler_errors;
          log_limited(accept_log, spdlog::level::err,
                      "accepting a connection threw: {}", e.what());
          boost::system::error_code ignored;
          acceptor_of(f, !admin).cancel(ignored);
          accept_later(f);
        }
      });
}

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
  auto left = [] (auto until) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
  };
  // The listeners first, each on its loop: an accept that ran before its
  // close has registered its connection by then, so the list below has
  // every connection there will be.
  if (!run_on(*f.loops.front(),
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
    if (!run_on(*f.loops[l->index], [&l = *l] { l.close(); }, left(until)))
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
    if (!run_on(*loop, [] {}, loop_barrier_time))
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

// The error of a listener that cannot listen on `host:port`.
std::runtime_error listen_error(const std::string& host, uint16_t port,
                                const std::string& why) {
  return std::runtime_error("cannot listen on " + host + ":" +
                            std::to_string(port) + ": " + why);
}

using reuse_port = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// `host:port`: a numeric address or a host name (the first address it
// resolves to).
tcp::endpoint listen_endpoint(net::io_context& ioc, const std::string& host,
                              uint16_t port) {
  boost::system::error_code ec;
  tcp::resolver resolver{ioc};
  auto results = resolver.resolve(
      host, std::to_string(port),
      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    throw std::runtime_error("cannot listen on '" + host +
                             "': " + (ec ? ec.message() : "no address"));
  return *results.begin();
}

// Listens on `ep` (`shared`: SO_REUSEPORT, one of a loop's listeners).
void listen_on(tcp::acceptor& a, const tcp::endpoint& ep, bool shared,
               const std::string& host) {
  boost::system::error_code ec;
  a.open(ep.protocol(), ec);
  if (!ec)
    a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec && shared)
    a.set_option(reuse_port(true), ec);
  if (!ec)
    a.bind(ep, ec);
  if (!ec)
    a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw listen_error(host, ep.port(), ec.message());
}

// Holds the name "sluice-node listen ADDRESS PORT" in the abstract Unix
// socket namespace (per network namespace; gone with the process) while
// the front listens: two nodes started on one address at the same moment
// could both pass the probe below before either listens.
void lock_listen_address(front_state& f, const tcp::endpoint& ep,
                         const std::string& host) {
  std::string name = "sluice-node listen " + ep.address().to_string() + " " +
                     std::to_string(ep.port());
  name.insert(name.begin(), '\0'); // abstract: no file
  f.listen_lock.emplace(f.ioc);
  boost::system::error_code ec;
  f.listen_lock->open(net::local::stream_protocol{}, ec);
  if (!ec)
    f.listen_lock->bind(net::local::stream_protocol::endpoint{name}, ec);
  if (ec == net::error::address_in_use)
    throw listen_error(host, ep.port(),
                       "address already in use (another sluice-node listens "
                       "there, or is starting on it)");
  if (ec)
    throw listen_error(host, ep.port(), "its lock: " + ec.message());
}

// Binds `host:port` for the main listener: once, or (`loops` > 1 with
// per-loop accepts) once per loop, all on the port the first got. With
// SO_REUSEPORT a bind would succeed beside another process listening the
// same way (another sluice-node started on the port by mistake would take
// half the connections): a lock against other nodes starting at the same
// moment, then a probe bind without SO_REUSEPORT, first, find the port
// taken. NOTE: a process of the same user that binds with SO_REUSEPORT
// after the node started still joins it (Linux allows it); run the node
// under a user of its own where that matters.
void bind_main(front_state& f, const std::string& host, uint16_t port) {
  auto ep = listen_endpoint(f.ioc, host, port);
  if (!f.per_loop_accept())
    return listen_on(f.acceptor, ep, false, host);
  if (port != 0) {
    lock_listen_address(f, ep, host);
    tcp::acceptor probe{f.ioc};
    boost::system::error_code ec;
    probe.open(ep.protocol(), ec);
    if (!ec)
      probe.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec)
      probe.bind(ep, ec); // bound, never listening: it takes no connection
    if (ec)
      throw listen_error(host, port, ec.message());
  }
  listen_on(f.acceptor, ep, true, host);
  boost::system::error_code ec;
  auto bound = f.acceptor.local_endpoint(ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + host + ": " + ec.message());
  for (size_t i = 1; i < f.loops.size(); ++i) {
    f.listeners.push_back(std::make_unique<node::loop_listener>(*f.loops[i], i));
    listen_on(f.listeners.back()->acceptor, bound, true, host);
  }
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
    bind_main(*impl_, settings.listen_host, settings.listen_port);
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
      listen_on(impl_->admin_acceptor,
                listen_endpoint(impl_->ioc, a.host, a.port), false, a.host);
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
  net::post(impl_->accept_strand, [state] {
    do_accept(*state, false);
    if (state->admin_acceptor.is_open())
      do_accept(*state, true);
  });
  for (auto& l : impl_->listeners)
    net::post(l->acceptor.get_executor(),
              [state, &l = *l] { accept_on_loop(*state, l); });
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
  close_loop_listeners(f);
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
