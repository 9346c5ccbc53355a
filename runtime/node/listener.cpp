#include "sluice/runtime/node/listener.hpp"

#include <cerrno>
#include <exception>
#include <memory>
#include <string>

#include <boost/asio/post.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/runtime/node/connection.hpp"
#include "sluice/runtime/node/fd_limit.hpp"
#include "sluice/runtime/node/front_state.hpp"

namespace sluice::node {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

log_limit accept_log;
log_limit full_log;

bool resource_exhausted(const boost::system::error_code& ec) {
  return ec == net::error::no_descriptors || ec.value() == ENFILE ||
         ec == net::error::no_buffer_space || ec == net::error::no_memory;
}

// One listener of the accept loop: the main one or `node.admin_listen`
// (`admin`), which share a strand and one back-off -- running out of
// descriptors pauses both --, or one per loop (`node.accept =
// "reuseport"`, `own`), which pauses alone and keeps its connections on
// its loop.
struct listener {
  tcp::acceptor& acceptor;
  bool admin = false;
  node::loop_listener* own = nullptr;
};

listener main_listener(front_state& f) {
  return {f.acceptor, false, nullptr};
}

listener admin_listener(front_state& f) {
  return {f.admin_acceptor, true, nullptr};
}

listener own_listener(node::loop_listener& l) {
  return {l.acceptor, false, &l};
}

void accept_next(front_state& f, listener l);

// Restarts the main and the admin listener after the shared back-off.
void accept_later(front_state& f) {
  f.accept_backoff.expires_after(accept_backoff_time);
  f.accept_backoff.async_wait([&f](boost::system::error_code ec) {
    if (!ec && !f.stopping) {
      accept_next(f, main_listener(f));
      if (f.admin_acceptor.is_open())
        accept_next(f, admin_listener(f));
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

std::string exception_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

// Accepting failed (out of descriptors, say): a listener of its own
// pauses alone -- the others fail and pause the same way, the limit being
// the process's, and connections the kernel hashed to it wait in its
// backlog meanwhile --; the main and the admin listener pause together
// (the other's accept would fail the same way), and the timer restarts
// both.
void pause(front_state& f, listener l) {
  if (l.own == nullptr) {
    boost::system::error_code ignored;
    (l.admin ? f.acceptor : f.admin_acceptor).cancel(ignored);
    accept_later(f);
    return;
  }
  l.own->backoff.expires_after(accept_backoff_time);
  l.own->backoff.async_wait([&f, l](boost::system::error_code ec) {
    if (!ec && !f.stopping)
      accept_next(f, l);
  });
}

// A listener whose accepts cannot go on (no memory even for the back-off)
// is closed: for one of a loop's own, the kernel then spreads new
// connections over the other loops' listeners instead of queueing them on
// one nobody accepts from.
void give_up(listener l, const char* why) noexcept {
  boost::system::error_code ignored;
  if (l.own != nullptr)
    l.own->close();
  else
    l.acceptor.close(ignored);
  try {
    if (l.own != nullptr)
      log_limited(accept_log, spdlog::level::err,
                  "event loop {}'s listener closed: {}; the other loops' "
                  "listeners take its connections",
                  l.own->index, why);
    else
      log_limited(accept_log, spdlog::level::critical,
                  "the {} listener closed: {}",
                  l.admin ? "admin" : "main", why);
  } catch (...) {
    // logging failed too
  }
}

// The one accept loop, for every listener. A listener of a loop's own
// keeps its connections on its loop; the main one's go to the first loop
// when each loop has a listener, else (like the admin one's) to the loops
// in turn.
void accept_next(front_state& f, listener l) {
  auto on_accept = [&f, l](boost::system::error_code ec, tcp::socket socket) {
    try {
      if (f.stopping || ec == net::error::operation_aborted)
        return;
      if (ec) {
        log_accept_error(f, ec);
        if (ec == net::error::connection_aborted)
          return accept_next(f, l); // that client gave up: nothing to wait for
        return pause(f, l);
      }
      admit(f, l.admin, std::move(socket));
      accept_next(f, l);
    } catch (...) {
      // E.g. no memory for a connection: keep accepting after a pause.
      ++f.counters.handler_errors;
      try {
        log_limited(accept_log, spdlog::level::err,
                    "accepting a connection threw: {}",
                    exception_text(std::current_exception()));
        pause(f, l);
      } catch (...) {
        give_up(l, "its accept could not be re-armed");
      }
    }
  };
  if (l.own != nullptr)
    l.acceptor.async_accept(std::move(on_accept));
  else
    l.acceptor.async_accept(f.per_loop_accept() && !l.admin
                                ? f.loops.front()->get_executor()
                                : f.next_connection_executor(),
                            std::move(on_accept));
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

} // namespace

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

void bind_admin(front_state& f, const std::string& host, uint16_t port) {
  listen_on(f.admin_acceptor, listen_endpoint(f.ioc, host, port), false,
            host);
}

void start_accepting(front_state& f) {
  net::post(f.accept_strand, [&f] {
    accept_next(f, main_listener(f));
    if (f.admin_acceptor.is_open())
      accept_next(f, admin_listener(f));
  });
  for (auto& l : f.listeners)
    net::post(l->acceptor.get_executor(),
              [&f, &l = *l] { accept_next(f, own_listener(l)); });
}

void close_loop_listeners(front_state& f) {
  for (auto& l : f.listeners)
    net::post(l->acceptor.get_executor(), [&l = *l] { l.close(); });
}

} // namespace sluice::node
