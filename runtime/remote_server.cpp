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

} // namespace sluice
