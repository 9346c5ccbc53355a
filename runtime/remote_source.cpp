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
#include "sluice/runtime/remote_parts.hpp"
#include "sluice/runtime/remote_wire.hpp"

namespace sluice {

using namespace remote_parts;

void enable_remote_sources(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::sluice>();
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
    tell(link_up_atom_v);
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
    tell(link_down_atom_v, std::string{"remote source lost"});
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
