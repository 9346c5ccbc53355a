#include "sluice/runtime/remote_source.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "sluice/actors/log.hpp"
#include "sluice/messages/atoms.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

void enable_remote_sources(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  cfg.add_message_types<caf::id_block::sluice>();
  // A link lost without a word (a partition, a host powered off) sends no
  // reset: CAF's heartbeats notice it, and the connection goes after
  // `remote_link_timeout` without traffic (CAF's default is never).
  cfg.set("middleman.heartbeat-interval", caf::timespan{remote_heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{remote_link_timeout});
}

namespace {

source_reply transient_reply(const char* why) {
  source_reply r;
  r.kind = policy::outcome_kind::transient;
  r.body = std::string{R"({"error":")"} + why + "\"}";
  return r;
}

/// The most attempts one served host runs at once; more are refused
/// `transient` (a node that floods it must not exhaust its process).
constexpr size_t max_host_attempts = 10000;

// -- the served side ----------------------------------------------------------

// One attempt on the served side: asks the team's source as its requester,
// sends the answer to the node, and quits. Terminated when the node
// withdraws the attempt -- the source sees its requester go.
caf::behavior requester(caf::event_based_actor* self, source_actor source,
                        call_request req, caf::actor node, uint64_t tag) {
  auto answer = [self, node, tag](source_reply r) {
    self->send(node, remote_reply_atom_v, tag, std::move(r));
    self->quit();
  };
  // A source that dies holding the request never answers it.
  self->monitor(source);
  self->set_down_handler([answer](caf::down_msg&) {
    answer(transient_reply("remote source terminated"));
  });
  self->request(source, caf::infinite, attempt_atom_v, std::move(req))
      .then([answer](source_reply& r) { answer(std::move(r)); },
            [answer](caf::error&) {
              answer(transient_reply("remote source failed"));
            });
  return {[](run_atom) {}};
}

struct host_state {
  source_actor source;
  std::shared_ptr<std::atomic<size_t>> in_flight;
  /// Per node (its connector): its attempts by tag.
  std::unordered_map<caf::actor_addr, std::unordered_map<uint64_t, caf::actor>>
      nodes;
  /// Each requester's node and tag.
  std::unordered_map<caf::actor_addr, std::pair<caf::actor_addr, uint64_t>>
      requesters;

  void count() { in_flight->store(requesters.size()); }

  static inline const char* name = "sluice.remote_source_host";
};

using host_actor = caf::stateful_actor<host_state>;

caf::behavior serve_host(host_actor* self, source_actor source,
                         std::shared_ptr<std::atomic<size_t>> in_flight) {
  self->state.source = std::move(source);
  self->state.in_flight = std::move(in_flight);
  // Messages from anyone who reaches the port: nothing unexpected may end
  // the host (CAF's default answers an error, which would end a sender
  // that does not expect one -- and an error message ends this actor).
  self->set_default_handler(caf::drop);
  self->set_error_handler([](caf::error&) {});
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (auto r = st.requesters.find(dm.source); r != st.requesters.end()) {
      // An attempt ended (answered or withdrawn).
      auto n = st.nodes.find(r->second.first);
      if (n != st.nodes.end())
        n->second.erase(r->second.second);
      st.requesters.erase(r);
    } else if (auto n = st.nodes.find(dm.source); n != st.nodes.end()) {
      // A node went (its process died, the connection dropped): its
      // attempts are withdrawn.
      for (auto& [tag, req] : n->second) {
        st.requesters.erase(req.address());
        self->send_exit(req, caf::exit_reason::user_shutdown);
      }
      st.nodes.erase(n);
    }
    st.count();
  });
  return {
      [self](remote_attempt_atom, uint64_t tag, call_request& req) {
        auto& st = self->state;
        auto node = caf::actor_cast<caf::actor>(self->current_sender());
        if (!node)
          return; // nobody to answer
        auto known = st.nodes.find(node.address());
        if (known != st.nodes.end() && known->second.count(tag) != 0)
          return; // a duplicate: the first one answers
        if (st.requesters.size() >= max_host_attempts) {
          self->send(node, remote_reply_atom_v, tag,
                     transient_reply("remote source host is full"));
          return;
        }
        auto [n, fresh] = st.nodes.try_emplace(node.address());
        if (fresh)
          self->monitor(node);
        auto r = self->spawn(requester, st.source, std::move(req), node, tag);
        self->monitor(r);
        n->second.emplace(tag, r);
        st.requesters.emplace(r.address(), std::make_pair(node.address(), tag));
        st.count();
      },
      [self](cancel_atom, uint64_t tag) {
        auto& st = self->state;
        auto n = st.nodes.find(
            self->current_sender()
                ? caf::actor_cast<caf::actor_addr>(self->current_sender())
                : caf::actor_addr{});
        if (n == st.nodes.end())
          return;
        auto i = n->second.find(tag);
        if (i == n->second.end())
          return; // answered meanwhile
        self->send_exit(i->second, caf::exit_reason::user_shutdown);
      },
  };
}

} // namespace

remote_source_server::remote_source_server(caf::actor_system& sys,
                                           source_actor source, uint16_t port,
                                           const std::string& host_name) {
  if (!source)
    throw std::invalid_argument("remote_source_server: no source");
  auto count = std::make_shared<std::atomic<size_t>>(0);
  host_ = sys.spawn(serve_host, std::move(source), count);
  auto bound = sys.middleman().publish(host_, port, host_name.c_str(), true);
  if (!bound) {
    caf::anon_send_exit(host_, caf::exit_reason::user_shutdown);
    throw std::runtime_error("cannot serve the source on " + host_name + ":" +
                             std::to_string(port) + ": " +
                             sys.render(bound.error()));
  }
  port_ = *bound;
  in_flight_ = std::move(count);
}

remote_source_server::~remote_source_server() {
  if (host_)
    caf::anon_send_exit(host_, caf::exit_reason::user_shutdown);
}

size_t remote_source_server::in_flight() const {
  return in_flight_ ? in_flight_->load() : 0;
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
}

namespace {

using reconnect_atom = caf::atom_constant<caf::atom("rreconnect")>;

struct connector_state {
  remote_source_config cfg;
  /// The served host; null while not connected.
  caf::actor remote;
  bool connecting = false;
  duration backoff{};
  uint64_t next_tag = 1;
  struct attempt {
    caf::typed_response_promise<source_reply> promise;
    caf::actor_addr requester;
    /// A streamed call: the governor and its tag, which never cross the
    /// wire (the remote gets this connector and `wire_tag` instead).
    caf::actor stream_to;
    uint64_t stream_tag = 0;
    uint64_t wire_tag = 0;
    size_t streamed = 0;
  };
  std::unordered_map<uint64_t, attempt> pending;
  /// Streamed attempts by their random wire tag.
  std::unordered_map<uint64_t, uint64_t> by_wire_tag;
  std::mt19937_64 rng{std::random_device{}()};
  /// The connection answered once: its loss resets the backoff.
  bool proven = false;
  /// Each requester's attempt (the runtime's runners make one each).
  std::unordered_map<caf::actor_addr, uint64_t> by_requester;

  std::string where() const {
    return cfg.host + ":" + std::to_string(cfg.port);
  }

  static inline const char* name = "sluice.remote_source";
};

using connector_actor = caf::stateful_actor<connector_state>;

void connect(connector_actor* self);

void retry_later(connector_actor* self) {
  auto& st = self->state;
  st.backoff = st.backoff == duration::zero()
                   ? st.cfg.reconnect_min
                   : std::min(st.backoff * 2, st.cfg.reconnect_max);
  self->delayed_send(self, st.backoff, reconnect_atom::value);
}

void connect(connector_actor* self) {
  auto& st = self->state;
  if (st.remote || st.connecting)
    return;
  st.connecting = true;
  auto mm = self->system().middleman().actor_handle();
  self->request(mm, st.cfg.connect_timeout, caf::connect_atom_v, st.cfg.host,
                st.cfg.port)
      .then(
          [self](const caf::node_id&, caf::strong_actor_ptr& ptr,
                 const std::set<std::string>&) {
            auto& st = self->state;
            st.connecting = false;
            auto remote = caf::actor_cast<caf::actor>(std::move(ptr));
            if (!remote) {
              logger().warn("remote source {}: nothing served there",
                            st.where());
              retry_later(self);
              return;
            }
            st.remote = std::move(remote);
            self->monitor(st.remote);
            if (st.backoff == duration::zero())
              logger().info("remote source {}: connected", st.where());
          },
          [self](caf::error& err) {
            auto& st = self->state;
            st.connecting = false;
            // Logged once per outage, not per retry.
            if (st.backoff == duration::zero())
              logger().warn(
                  "remote source {}: cannot connect ({}); retrying "
                  "with backoff up to {} ms",
                  st.where(), self->system().render(err),
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      st.cfg.reconnect_max)
                      .count());
            retry_later(self);
          });
}

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

// Whether the message being handled comes from the served host's node
// (not from another process that learnt this connector's address).
bool from_remote(connector_actor* self) {
  auto& remote = self->state.remote;
  auto sender = self->current_sender();
  return remote && sender && sender->node() == remote->node();
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
  st.by_wire_tag.clear();
}

caf::behavior connector(connector_actor* self, remote_source_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  // A host of another version may answer with errors: never the end of
  // the connector.
  self->set_default_handler(caf::drop);
  self->set_error_handler([](caf::error&) {});
  // Stopped (the runtime goes): the attempts in flight are answered, not
  // left to their timeouts (CAF 0.17 drops an undelivered promise).
  self->set_exit_handler([self](caf::exit_msg& em) {
    fail_pending(self, "remote source stopped");
    self->quit(em.reason);
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.remote && dm.source == st.remote.address()) {
      // The host's process died or the connection dropped: what it had in
      // flight fails now, not at each attempt's timeout. A connection
      // that never answered (a host actor gone, its process up) does not
      // reset the backoff, nor log each time.
      if (st.proven || st.backoff == duration::zero())
        logger().warn("remote source {}: lost ({}); {} attempt(s) fail "
                      "transient, reconnecting",
                      st.where(), self->system().render(dm.reason),
                      st.pending.size());
      if (st.proven)
        st.backoff = duration::zero();
      st.proven = false;
      st.remote = nullptr;
      fail_pending(self, "remote source lost");
      retry_later(self);
      return;
    }
    // A requester went before its answer (the call was cancelled or timed
    // out): the host withdraws the attempt.
    auto r = st.by_requester.find(dm.source);
    if (r == st.by_requester.end())
      return;
    auto tag = r->second;
    st.by_requester.erase(r);
    st.pending.erase(tag);
    if (st.remote)
      self->send(st.remote, cancel_atom_v, tag);
  });
  connect(self);
  return {
      [self](attempt_atom, call_request& req) -> caf::result<source_reply> {
        auto& st = self->state;
        if (!st.remote)
          return transient_reply("remote source not connected");
        auto requester =
            caf::actor_cast<caf::actor_addr>(self->current_sender());
        auto tag = st.next_tag++;
        auto rp = self->make_response_promise<source_reply>();
        if (requester) {
          self->monitor(requester);
          st.by_requester[requester] = tag;
        }
        connector_state::attempt a{rp, requester};
        if (req.stream_to) {
          // The remote streams to this connector, under a tag it cannot
          // guess: the governor's handle would let it reach the call.
          a.stream_to = std::move(req.stream_to);
          a.stream_tag = req.stream_tag;
          do
            a.wire_tag = st.rng();
          while (a.wire_tag == 0 || st.by_wire_tag.count(a.wire_tag) != 0);
          st.by_wire_tag.emplace(a.wire_tag, tag);
          req.stream_to = caf::actor_cast<caf::actor>(self);
          req.stream_tag = a.wire_tag;
        }
        st.pending.emplace(tag, std::move(a));
        self->send(st.remote, remote_attempt_atom_v, tag, std::move(req));
        return rp;
      },
      [self](remote_reply_atom, uint64_t tag, source_reply& reply) {
        auto& st = self->state;
        if (!from_remote(self))
          return;
        st.proven = true;
        auto i = st.pending.find(tag);
        if (i == st.pending.end())
          return; // withdrawn, or lost before
        if (i->second.requester) {
          st.by_requester.erase(i->second.requester);
          self->demonitor(i->second.requester);
        }
        st.by_wire_tag.erase(i->second.wire_tag);
        i->second.promise.deliver(checked(std::move(reply)));
        st.pending.erase(i);
      },
      // A piece of a streamed answer: on to the governor, under its tag.
      [self](stream_chunk_atom, uint64_t wire_tag, std::string& bytes) {
        auto& st = self->state;
        if (!from_remote(self))
          return;
        auto w = st.by_wire_tag.find(wire_tag);
        if (w == st.by_wire_tag.end())
          return; // not a streamed attempt in flight
        auto i = st.pending.find(w->second);
        if (i == st.pending.end())
          return;
        auto& a = i->second;
        a.streamed += bytes.size();
        if (a.streamed > max_remote_body_bytes) {
          // Past the bound: the attempt ends (the caller's stream is cut).
          if (a.requester) {
            st.by_requester.erase(a.requester);
            self->demonitor(a.requester);
          }
          a.promise.deliver(
              transient_reply("remote source streamed past 64 MiB"));
          st.by_wire_tag.erase(w);
          st.pending.erase(i);
          return;
        }
        self->send(a.stream_to, stream_chunk_atom_v, a.stream_tag,
                   std::move(bytes));
      },
      [self](reconnect_atom) { connect(self); },
  };
}

} // namespace

source_actor spawn_remote_source(caf::actor_system& sys,
                                 remote_source_config cfg) {
  validate(cfg);
  // Untyped inside (it also hears the host's replies and its own timers);
  // to the runtime, a source like any other.
  return caf::actor_cast<source_actor>(sys.spawn(connector, std::move(cfg)));
}

} // namespace sluice
