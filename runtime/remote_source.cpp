#include "sluice/runtime/remote_source.hpp"

#include <algorithm>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/actors/loops/io_thread.hpp"
#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_scheduler.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/field_error.hpp"
#include "sluice/runtime/remote_link.hpp"
#include "sluice/runtime/remote_wire.hpp"

namespace sluice {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using remote_wire::frame;
using remote_wire::frame_kind;

void enable_remote_sources(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::sluice>();
}

namespace {

source_reply transient_reply(const char* why) {
  source_reply r;
  r.kind = policy::outcome_kind::transient;
  r.body = std::string{R"({"error":")"} + why + "\"}";
  return r;
}

remote::tls_files files_of(const remote_tls_config& tls) {
  return {tls.ca_file, tls.cert_file, tls.key_file};
}

// Certificate problems name their field under `tls.` (the config's
// `[sources.NAME.tls]`).
template <class F>
auto with_tls_prefix(F f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string{"tls."} + e.what());
  }
}

} // namespace

// -- the served side ----------------------------------------------------------

namespace {

struct served_conn;

/// The largest piece of a streamed answer one chunk frame carries (a
/// source's bigger chunk crosses in pieces).
constexpr size_t remote_chunk_bytes = size_t{1} << 20;

// Where a requester's answer and chunks go: posted to the connection on its
// loop (which may have gone: then they are dropped).
struct attempt_sink {
  std::shared_ptr<remote::loop_door> door;
  std::weak_ptr<served_conn> conn;
  uint64_t tag = 0;

  void reply(const source_reply& r) const;
  void chunk(const std::string& bytes) const;
};

// One attempt on the served side: asks the team's source as its requester
// and sends the answer back to the node. Terminated when the node
// withdraws the attempt or its connection goes -- the source sees its
// requester go. A streamed attempt's chunks come to it, and cross.
caf::behavior requester(caf::event_based_actor* self, source_actor source,
                        call_request req, bool streamed, attempt_sink sink) {
  auto answer = [self, sink](const source_reply& r) {
    sink.reply(r);
    self->quit();
  };
  if (streamed) {
    req.stream_to = caf::actor_cast<caf::actor>(self);
    req.stream_tag = sink.tag;
  }
  // A source that dies holding the request never answers it.
  self->monitor(source);
  self->set_down_handler([answer](caf::down_msg&) {
    answer(transient_reply("remote source terminated"));
  });
  self->request(source, caf::infinite, attempt_atom_v, std::move(req))
      .then([answer](source_reply& r) { answer(r); },
            [answer](caf::error&) {
              answer(transient_reply("remote source failed"));
            });
  return {
      [sink](stream_chunk_atom, uint64_t tag, const std::string& bytes) {
        if (tag == sink.tag)
          sink.chunk(bytes);
      },
  };
}

} // namespace

struct remote_source_server::impl {
  impl(caf::actor_system& sys, source_actor source,
       std::shared_ptr<ssl::context> tls)
      : sys(sys)
      , source(std::move(source))
      , tls(std::move(tls))
      , thread(sys, "remote source server")
      , door(std::make_shared<remote::loop_door>(thread.loop()))
      , acceptor(thread.loop()) {}

  caf::actor_system& sys;
  source_actor source;
  std::shared_ptr<ssl::context> tls;
  upstream::io_thread thread;
  std::shared_ptr<remote::loop_door> door;
  tcp::acceptor acceptor;
  uint16_t port = 0;
  std::shared_ptr<std::atomic<size_t>> in_flight =
      std::make_shared<std::atomic<size_t>>(0);
  counters stats;
  // -- on the loop only --
  std::unordered_map<uint64_t, std::shared_ptr<served_conn>> conns;
  uint64_t next_conn = 1;

  void accept();
  void stop_all();
};

namespace {

// One connection from a node: handshake, then frames; its attempts by tag.
struct served_conn : std::enable_shared_from_this<served_conn> {
  remote_source_server::impl* host = nullptr;
  uint64_t id = 0;
  std::unique_ptr<upstream::connection> conn;
  std::shared_ptr<remote::link> link;
  std::unordered_map<uint64_t, caf::actor> attempts;

  void handshake() {
    // A peer that connects and says nothing is dropped at the deadline.
    conn->tcp().expires_after(remote_handshake_timeout);
    conn->async_server_handshake([self = shared_from_this()](error_code ec) {
      if (ec) {
        ++self->host->stats.refused;
        self->conn->close();
        self->host->conns.erase(self->id);
        return;
      }
      ++self->host->stats.authenticated;
      std::weak_ptr<served_conn> w = self;
      self->link = std::make_shared<remote::link>(
          std::move(self->conn),
          [w](frame&& f) {
            if (auto c = w.lock())
              c->on_frame(std::move(f));
          },
          [w](const std::string& why) {
            if (auto c = w.lock())
              c->closed(why);
          });
      self->link->start();
    });
  }

  void on_frame(frame&& f) {
    switch (f.kind) {
    case frame_kind::attempt:
      return attempt(f.tag, f.payload);
    case frame_kind::cancel: {
      auto i = attempts.find(f.tag);
      if (i == attempts.end())
        return; // answered meanwhile
      caf::anon_send_exit(i->second, caf::exit_reason::user_shutdown);
      attempts.erase(i);
      return;
    }
    default:
      // Replies and chunks go the other way: a peer that sends them does
      // not speak this protocol.
      ++host->stats.bad_frames;
      return link->close("a frame only the served side sends");
    }
  }

  void attempt(uint64_t tag, const std::string& payload) {
    if (attempts.count(tag) != 0)
      return; // a duplicate: the first one answers
    bool streamed = false;
    auto req = remote_wire::decode_attempt(payload, streamed);
    if (!req) {
      ++host->stats.bad_frames;
      return link->close("a malformed attempt");
    }
    ++host->stats.attempts;
    if (host->in_flight->load() >= max_host_attempts) {
      link->send(remote_wire::encode_reply(
          tag, transient_reply("remote source host is full")));
      return;
    }
    attempt_sink sink{host->door, weak_from_this(), tag};
    auto count = host->in_flight;
    ++*count;
    auto r = host->sys.spawn(requester, host->source, std::move(*req), streamed,
                             std::move(sink));
    caf::actor_cast<caf::abstract_actor*>(r)->attach_functor(
        [count](const caf::error&) { --*count; });
    attempts.emplace(tag, std::move(r));
  }

  // The requester answered: the reply crosses unless the attempt was
  // withdrawn meanwhile.
  void finished(uint64_t tag, std::string reply_frame) {
    if (attempts.erase(tag) == 0 || !link)
      return;
    link->send(std::move(reply_frame));
  }

  void chunk(uint64_t tag, std::string chunk_frame) {
    if (attempts.count(tag) != 0 && link)
      link->send(std::move(chunk_frame));
  }

  // The node went (closed, reset, silent, refused frame): its attempts are
  // withdrawn.
  void closed(const std::string& why) {
    if (why.rfind("refused the peer's frame", 0) == 0)
      ++host->stats.bad_frames;
    for (auto& [tag, r] : attempts)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    attempts.clear();
    host->conns.erase(id); // may release this: nothing after it
  }
};

void attempt_sink::reply(const source_reply& r) const {
  // A body the node would refuse (its frame past the limit would close the
  // connection, failing every attempt on it) fails this attempt alone.
  auto f = r.body.size() <= max_remote_body_bytes
               ? remote_wire::encode_reply(tag, r)
               : remote_wire::encode_reply(
                     tag, transient_reply("remote source answered a body "
                                          "past 64 MiB"));
  door->post([c = conn, tag = tag, f = std::move(f)]() mutable {
    if (auto s = c.lock())
      s->finished(tag, std::move(f));
  });
}

void attempt_sink::chunk(const std::string& bytes) const {
  // Pieces of at most `remote_chunk_bytes`: any chunk a source sends fits a
  // frame (the node bounds the stream's total).
  size_t at = 0;
  do {
    auto f = remote_wire::encode(frame_kind::chunk, tag,
                                 bytes.substr(at, remote_chunk_bytes));
    door->post([c = conn, tag = tag, f = std::move(f)]() mutable {
      if (auto s = c.lock())
        s->chunk(tag, std::move(f));
    });
    at += remote_chunk_bytes;
  } while (at < bytes.size());
}

} // namespace

void remote_source_server::impl::accept() {
  auto c = std::make_shared<served_conn>();
  c->host = this;
  c->conn = std::make_unique<upstream::connection>(thread.loop(), tls.get());
  acceptor.async_accept(c->conn->tcp().socket(), [this, c](error_code ec) {
    if (ec == net::error::operation_aborted || !acceptor.is_open())
      return;
    if (!ec) {
      ++stats.accepted;
      set_no_delay(c->conn->tcp().socket());
      if (conns.size() >= max_remote_connections) {
        c->conn->close(); // a flood costs it nothing more
      } else {
        c->id = next_conn++;
        conns.emplace(c->id, c);
        c->handshake();
      }
      return accept();
    }
    // EMFILE and the like: try again shortly rather than spin.
    auto t = std::make_shared<net::steady_timer>(thread.loop());
    t->expires_after(std::chrono::milliseconds{100});
    t->async_wait([this, t](error_code e) {
      if (!e)
        accept();
    });
  });
}

void remote_source_server::impl::stop_all() {
  error_code ec;
  acceptor.close(ec);
  auto all = std::move(conns);
  for (auto& [id, c] : all) {
    if (auto l = c->link)
      l->close("the server stops");
    else if (c->conn)
      c->conn->close();
    for (auto& [tag, r] : c->attempts)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    c->attempts.clear();
  }
}

remote_source_server::remote_source_server(caf::actor_system& sys,
                                           source_actor source, uint16_t port,
                                           const remote_tls_config& tls,
                                           const std::string& host_name) {
  if (!source)
    throw std::invalid_argument("remote_source_server: no source");
  auto ctx = with_tls_prefix(
      [&] { return remote::make_server_tls_context(files_of(tls)); });
  impl_ = std::make_shared<impl>(sys, std::move(source), std::move(ctx));
  error_code ec;
  auto address = net::ip::make_address(host_name, ec);
  if (ec)
    throw std::runtime_error("cannot serve the source on '" + host_name +
                             "': not an IP address");
  tcp::endpoint ep{address, port};
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec)
    a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(ep, ec);
  if (!ec)
    a.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot serve the source on " + host_name + ":" +
                             std::to_string(port) + ": " + ec.message());
  impl_->port = a.local_endpoint().port();
  impl_->accept();
  impl_->thread.start();
}

remote_source_server::~remote_source_server() {
  if (!impl_)
    return;
  // The loop stopped and joined first (what requesters post afterwards is
  // dropped at the door); then, with nothing running on it, every
  // connection is closed and its attempts withdrawn from this thread.
  impl_->door->close();
  impl_->thread.stop();
  impl_->stop_all();
}

uint16_t remote_source_server::port() const noexcept {
  return impl_ ? impl_->port : 0;
}

size_t remote_source_server::in_flight() const {
  return impl_ ? impl_->in_flight->load() : 0;
}

const remote_source_server::counters&
remote_source_server::stats() const noexcept {
  return impl_->stats;
}

// -- the node's side ----------------------------------------------------------

void validate(const remote_source_config& cfg) {
  if (cfg.host.empty())
    throw field_error("address", "needs a host");
  if (cfg.port == 0)
    throw field_error("address", "needs a port in [1, 65535]");
  if (cfg.connect_timeout <= duration::zero())
    throw field_error("connect_timeout", "must be positive");
  if (cfg.reconnect_min <= duration::zero())
    throw field_error("reconnect_min", "must be positive");
  if (cfg.reconnect_max < cfg.reconnect_min)
    throw field_error("reconnect_max", "must be at least reconnect_min");
  // The files are loaded here, so a config that names a missing or
  // unusable one is refused when it is read (and by --check-config).
  with_tls_prefix([&] { remote::make_client_tls_context(files_of(cfg.tls)); });
}

namespace {

using link_up_atom = caf::atom_constant<caf::atom("rlinkup")>;
using link_down_atom = caf::atom_constant<caf::atom("rlinkdown")>;

// The node's connection to a served source, on the connector's own loop:
// dials, keeps the link, redials with backoff, and tells the connector.
struct dialer : std::enable_shared_from_this<dialer> {
  dialer(net::io_context& ioc, std::shared_ptr<remote::loop_door> door,
         std::shared_ptr<ssl::context> tls, remote_source_config cfg,
         caf::actor owner, std::shared_ptr<remote_link_health> health)
      : ioc(ioc)
      , door(std::move(door))
      , tls(std::move(tls))
      , cfg(std::move(cfg))
      , owner(caf::actor_cast<caf::weak_actor_ptr>(owner))
      , health(std::move(health))
      , retry(ioc) {}

  net::io_context& ioc;
  std::shared_ptr<remote::loop_door> door;
  std::shared_ptr<ssl::context> tls;
  remote_source_config cfg;
  /// Weak: the connector owns the loop that runs this.
  caf::weak_actor_ptr owner;
  std::shared_ptr<remote_link_health> health;
  net::steady_timer retry;
  duration backoff{};
  /// The link answered once: its loss resets the backoff.
  bool proven = false;
  std::shared_ptr<void> dialing;
  std::shared_ptr<remote::link> link;
  /// The connector went: no more dials, no more news.
  bool stopped = false;

  std::string where() const {
    return cfg.host + ":" + std::to_string(cfg.port);
  }

  template <class... Ts>
  void tell(Ts&&... xs) {
    if (auto a = caf::actor_cast<caf::actor>(owner))
      caf::anon_send(a, std::forward<Ts>(xs)...);
  }

  void connect() {
    if (stopped)
      return;
    auto name = cfg.tls.server_name.empty() ? cfg.host : cfg.tls.server_name;
    dialing = remote::dial(
        ioc, door, tls, cfg.host, cfg.port, name, cfg.connect_timeout,
        [self = shared_from_this()](std::unique_ptr<upstream::connection> conn,
                                    const std::string& why) {
          self->dialing.reset();
          if (!conn)
            return self->failed("cannot connect: " + why);
          self->up(std::move(conn));
        });
  }

  void up(std::unique_ptr<upstream::connection> conn) {
    std::weak_ptr<dialer> w = shared_from_this();
    link = std::make_shared<remote::link>(
        std::move(conn),
        [w](frame&& f) {
          if (auto d = w.lock())
            d->on_frame(std::move(f));
        },
        [w](const std::string& why) {
          if (auto d = w.lock())
            d->lost(why);
        });
    link->start();
    if (backoff == duration::zero())
      logger().info("remote source {}: connected", where());
    health->set(std::nullopt);
    tell(link_up_atom::value);
  }

  void on_frame(frame&& f) {
    switch (f.kind) {
    case frame_kind::reply: {
      auto r = remote_wire::decode_reply(f.payload);
      if (!r)
        return link->close("a malformed reply");
      proven = true;
      return tell(remote_reply_atom_v, f.tag, std::move(*r));
    }
    case frame_kind::chunk:
      return tell(stream_chunk_atom_v, f.tag, std::move(f.payload));
    default:
      return link->close("a frame only the node sends");
    }
  }

  void lost(const std::string& why) {
    link.reset();
    if (stopped)
      return;
    if (proven || backoff == duration::zero())
      logger().warn("remote source {}: lost ({}); its attempts fail "
                    "transient, reconnecting",
                    where(), why);
    if (proven)
      backoff = duration::zero();
    proven = false;
    health->set("lost: " + why);
    tell(link_down_atom::value, std::string{"remote source lost"});
    retry_later();
  }

  void failed(const std::string& why) {
    // Logged once per outage, not per retry.
    if (backoff == duration::zero())
      logger().warn("remote source {}: {}; retrying with backoff up to {} ms",
                    where(), why,
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        cfg.reconnect_max)
                        .count());
    health->set(why);
    retry_later();
  }

  void retry_later() {
    backoff = backoff == duration::zero()
                  ? cfg.reconnect_min
                  : std::min(backoff * 2, cfg.reconnect_max);
    retry.expires_after(backoff);
    retry.async_wait([w = weak_from_this()](error_code ec) {
      if (auto d = w.lock(); d && !ec)
        d->connect();
    });
  }

  void send(std::string f) {
    // A copy: a close inside `send` resets the member.
    if (auto l = link)
      l->send(std::move(f));
  }

  void stop() {
    stopped = true;
    retry.cancel();
    dialing.reset();
    if (auto l = link)
      l->close("the node stops");
  }
};

struct connector_state {
  remote_source_config cfg;
  std::shared_ptr<remote_link_health> health;
  /// The loop of this source's link under CAF's own scheduler (none on the
  /// loop scheduler, whose loops it uses, nor for a dry run). Destroyed
  /// with the state: the door closed first, then the thread joined.
  std::unique_ptr<upstream::io_thread> thread;
  std::shared_ptr<remote::loop_door> door;
  std::shared_ptr<dialer> link;
  bool up = false;
  uint64_t next_tag = 1;
  struct attempt {
    caf::typed_response_promise<source_reply> promise;
    caf::actor_addr requester;
    /// A streamed call: the governor and its tag, which never cross the
    /// wire (the served side streams under the attempt's tag).
    caf::actor stream_to;
    uint64_t stream_tag = 0;
    size_t streamed = 0;
  };
  std::unordered_map<uint64_t, attempt> pending;
  /// Each requester's attempt (the runtime's runners make one each).
  std::unordered_map<caf::actor_addr, uint64_t> by_requester;

  void post(std::string f) {
    if (door)
      door->post(
          [d = link, f = std::move(f)]() mutable { d->send(std::move(f)); });
  }

  ~connector_state() {
    if (door) {
      door->post([d = link] { d->stop(); });
      door->close();
    }
    link.reset();
    if (thread)
      thread->stop();
  }

  static inline const char* name = "sluice.remote_source";
};

using connector_actor = caf::stateful_actor<connector_state>;

// The answer must not carry what this node cannot use: an outcome kind it
// does not know, a body past the bound, a Retry-After out of range.
source_reply checked(source_reply r) {
  if (static_cast<uint8_t>(r.kind) >
      static_cast<uint8_t>(policy::outcome_kind::permanent))
    return transient_reply("remote source sent an unknown outcome");
  if (r.body.size() > max_remote_body_bytes)
    return transient_reply("remote source sent a body past 64 MiB");
  // Both go into the node's HTTP answer: a CR or LF in the media type
  // would add headers of the remote's choosing.
  if (r.content_type.size() > 255 ||
      std::any_of(r.content_type.begin(), r.content_type.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u >= 0x7f;
      }))
    return transient_reply("remote source sent a malformed content type");
  if (r.status != 0 && (r.status < 100 || r.status > 599))
    r.status = 0;
  if (r.retry_after)
    r.retry_after = std::clamp<duration>(*r.retry_after, duration::zero(),
                                         std::chrono::hours{24});
  return r;
}

// Every attempt in flight fails `transient` now.
void fail_pending(connector_actor* self, const char* why) {
  auto& st = self->state;
  for (auto& [tag, a] : st.pending) {
    if (a.requester)
      self->demonitor(a.requester);
    a.promise.deliver(transient_reply(why));
  }
  st.pending.clear();
  st.by_requester.clear();
}

// Ends attempt `i` (answered, or cut): no longer watched.
void forget(
    connector_actor* self,
    std::unordered_map<uint64_t, connector_state::attempt>::iterator i) {
  auto& st = self->state;
  if (i->second.requester) {
    st.by_requester.erase(i->second.requester);
    self->demonitor(i->second.requester);
  }
  st.pending.erase(i);
}

caf::behavior connector(connector_actor* self, remote_source_config cfg,
                        std::shared_ptr<ssl::context> tls,
                        std::shared_ptr<remote_link_health> health) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.health = std::move(health);
  self->set_default_handler(caf::drop);
  self->set_error_handler([](caf::error&) {});
  // Stopped (the runtime goes): the attempts in flight are answered, not
  // left to their timeouts (CAF 0.17 drops an undelivered promise).
  self->set_exit_handler([self](caf::exit_msg& em) {
    fail_pending(self, "remote source stopped");
    self->quit(em.reason);
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    // A requester went before its answer (the call was cancelled or timed
    // out): the served side withdraws the attempt.
    auto& st = self->state;
    auto r = st.by_requester.find(dm.source);
    if (r == st.by_requester.end())
      return;
    auto tag = r->second;
    st.by_requester.erase(r);
    st.pending.erase(tag);
    if (st.up)
      st.post(remote_wire::encode(frame_kind::cancel, tag, {}));
  });
  if (st.cfg.connect) {
    // On the node's loops (the loop scheduler) the link takes one of them,
    // in turn: no thread of its own, and nothing to join when it stops --
    // a join on a loop's thread would stall it. Under CAF's own scheduler,
    // a loop on a thread of its own, as the HTTP sources have.
    net::io_context* ioc = nullptr;
    std::shared_ptr<loop_life> life;
    if (auto* loops = loop_scheduler::of(self->system())) {
      static std::atomic<size_t> next_loop{0};
      auto i = next_loop++ % loops->loops();
      ioc = &loops->loop(i);
      life = loops->life(i);
    } else {
      st.thread = std::make_unique<upstream::io_thread>(
          self->system(), "remote source " + st.cfg.host);
      ioc = &st.thread->loop();
    }
    st.door = std::make_shared<remote::loop_door>(*ioc, std::move(life));
    st.link =
        std::make_shared<dialer>(*ioc, st.door, std::move(tls), st.cfg,
                                 caf::actor_cast<caf::actor>(self), st.health);
    // The first dial is queued: nothing here waits for the network.
    st.door->post([d = st.link] { d->connect(); });
    if (st.thread)
      st.thread->start();
  } else {
    st.health->set("not connected (a dry run)");
  }
  return {
      [self](attempt_atom, call_request& req) -> caf::result<source_reply> {
        auto& st = self->state;
        if (!st.up)
          return transient_reply("remote source not connected");
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto tag = st.next_tag++;
        auto rp = self->make_response_promise<source_reply>();
        if (requester) {
          self->monitor(requester);
          st.by_requester[requester] = tag;
        }
        connector_state::attempt a;
        a.promise = rp;
        a.requester = requester;
        a.stream_to = req.stream_to;
        a.stream_tag = req.stream_tag;
        st.post(remote_wire::encode_attempt(tag, req));
        st.pending.emplace(tag, std::move(a));
        return rp;
      },
      [self](remote_reply_atom, uint64_t tag, source_reply& reply) {
        auto& st = self->state;
        auto i = st.pending.find(tag);
        if (i == st.pending.end())
          return; // withdrawn, or lost before
        i->second.promise.deliver(checked(std::move(reply)));
        forget(self, i);
      },
      // A piece of a streamed answer: on to the governor, under its tag.
      [self](stream_chunk_atom, uint64_t tag, std::string& bytes) {
        auto& st = self->state;
        auto i = st.pending.find(tag);
        if (i == st.pending.end() || !i->second.stream_to)
          return; // not a streamed attempt in flight
        auto& a = i->second;
        a.streamed += bytes.size();
        if (a.streamed > max_remote_body_bytes) {
          // Past the bound: the attempt ends (the caller's stream is cut),
          // and the served side withdraws it.
          a.promise.deliver(
              transient_reply("remote source streamed past 64 MiB"));
          st.post(remote_wire::encode(frame_kind::cancel, tag, {}));
          forget(self, i);
          return;
        }
        self->send(a.stream_to, stream_chunk_atom_v, a.stream_tag,
                   std::move(bytes));
      },
      [self](link_up_atom) { self->state.up = true; },
      [self](link_down_atom, const std::string&) {
        self->state.up = false;
        fail_pending(self, "remote source lost");
      },
  };
}

} // namespace

source_actor spawn_remote_source(caf::actor_system& sys,
                                 remote_source_config cfg,
                                 std::shared_ptr<remote_link_health> health) {
  validate(cfg);
  auto tls = with_tls_prefix(
      [&] { return remote::make_client_tls_context(files_of(cfg.tls)); });
  if (!health)
    health = std::make_shared<remote_link_health>();
  // Untyped inside (it also hears its link); to the runtime, a source like
  // any other.
  return caf::actor_cast<source_actor>(
      sys.spawn(connector, std::move(cfg), std::move(tls), std::move(health)));
}

} // namespace sluice
