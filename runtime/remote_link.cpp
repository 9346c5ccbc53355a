#include "sluice/runtime/remote_link.hpp"

#include <fstream>
#include <stdexcept>
#include <thread>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include "sluice/actors/wire/tcp_options.hpp"
#include "sluice/actors/http_source.hpp"
#include "sluice/runtime/policy/field_error.hpp"

namespace sluice::remote {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// -- TLS contexts -------------------------------------------------------------

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& what) {
  throw field_error(field, what);
}

void require_readable(const std::string& field, const std::string& path) {
  if (path.empty())
    refuse(field, "missing; a remote source is reached over mutual TLS "
                  "only (ca_file, cert_file and key_file on both sides)");
  std::ifstream in{path, std::ios::binary};
  if (!in)
    refuse(field, "cannot read '" + path + "'");
}

} // namespace

std::shared_ptr<ssl::context> make_server_tls_context(const tls_files& files) {
  require_readable("ca_file", files.ca_file);
  require_readable("cert_file", files.cert_file);
  require_readable("key_file", files.key_file);
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  auto native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ctx->set_options(ssl::context::default_workarounds |
                   ssl::context::no_compression | ssl::context::single_dh_use);
  // An encrypted key would make OpenSSL ask for a passphrase on the
  // terminal: answer with none, so it is refused.
  ctx->set_password_callback([](std::size_t, ssl::context::password_purpose) {
    return std::string{};
  });
  // The point of it all: no certificate by the CA, no connection.
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  error_code ec;
  ctx->load_verify_file(files.ca_file, ec);
  if (ec)
    refuse("ca_file", "no CA certificate in '" + files.ca_file + "' (" +
                          ec.message() + ")");
  ctx->use_certificate_chain_file(files.cert_file, ec);
  if (ec)
    refuse("cert_file", "no certificate in '" + files.cert_file + "' (" +
                            ec.message() + ")");
  ctx->use_private_key_file(files.key_file, ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(native) != 1)
    refuse("key_file", "no usable (unencrypted PEM) private key matching "
                       "cert_file in '" +
                           files.key_file + "'");
  ERR_clear_error();
  return ctx;
}

std::shared_ptr<ssl::context> make_client_tls_context(const tls_files& files) {
  require_readable("ca_file", files.ca_file);
  require_readable("cert_file", files.cert_file);
  require_readable("key_file", files.key_file);
  // The HTTP source's client context (TLS 1.2+, the CA, a client
  // certificate checked to match its key), with our field names.
  http_tls_config cfg;
  cfg.ca_file = files.ca_file;
  cfg.client_cert = files.cert_file;
  cfg.client_key = files.key_file;
  cfg.verify = true;
  try {
    return upstream::make_tls_context(cfg);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    auto rename = [&](const std::string& from, const std::string& to) {
      if (what.compare(0, from.size(), from) == 0)
        what = to + what.substr(from.size());
    };
    rename("client_cert", "cert_file");
    rename("client_key", "key_file");
    throw std::invalid_argument(what);
  }
}

// -- link ---------------------------------------------------------------------

link::link(std::unique_ptr<upstream::connection> conn, on_frame_fn on_frame,
           on_close_fn on_close)
    : conn_(std::move(conn))
    , on_frame_(std::move(on_frame))
    , on_close_(std::move(on_close))
    , heartbeat_(conn_->get_executor())
    , last_read_(std::chrono::steady_clock::now()) {
  // The link times itself (heartbeat, idle): no deadline on the stream.
  conn_->tcp().expires_never();
}

void link::start() {
  read();
  tick();
}

void link::read() {
  conn_->async_read_some(net::buffer(in_), [self = shared_from_this()](
                                               error_code ec, size_t n) {
    if (!self->open_)
      return;
    if (ec)
      return self->close(ec == net::error::eof || upstream::is_end_of_stream(ec)
                             ? "closed by the peer"
                             : "read failed: " + ec.message());
    self->last_read_ = std::chrono::steady_clock::now();
    auto why =
        self->decoder_.feed(self->in_.data(), n, [&](remote_wire::frame&& f) {
          ++self->frames_in_;
          if (f.kind != remote_wire::frame_kind::heartbeat && self->open_)
            self->on_frame_(std::move(f));
        });
    if (why != nullptr)
      return self->close(std::string{"refused the peer's frame: "} + why);
    if (self->open_)
      self->read();
  });
}

void link::send(std::string frame) {
  if (!open_)
    return;
  if (queued_ + frame.size() > max_remote_queued_bytes)
    return close("the peer leaves more than max_remote_queued_bytes unread");
  queued_ += frame.size();
  out_.push_back(std::move(frame));
  if (!writing_)
    write();
}

void link::write() {
  writing_ = true;
  // The front frame is owned by the queue until this completes.
  net::async_write(*conn_, net::buffer(out_.front()),
                   [self = shared_from_this()](error_code ec, size_t) {
                     self->writing_ = false;
                     if (!self->open_)
                       return;
                     if (ec)
                       return self->close("write failed: " + ec.message());
                     self->queued_ -= self->out_.front().size();
                     self->out_.pop_front();
                     if (!self->out_.empty())
                       self->write();
                   });
}

void link::tick() {
  heartbeat_.expires_after(remote_heartbeat);
  heartbeat_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || !self->open_)
      return;
    if (std::chrono::steady_clock::now() - self->last_read_ >
        remote_link_timeout)
      return self->close("the peer was silent for 5 s");
    self->send(remote_wire::encode(remote_wire::frame_kind::heartbeat, 0, {}));
    self->tick();
  });
}

void link::close(const std::string& why) {
  if (!open_)
    return;
  open_ = false;
  heartbeat_.cancel();
  conn_->close();
  // Called once; `on_frame_` stays (this may run inside it), and
  // `open_` keeps it from being called again.
  auto on_close = std::move(on_close_);
  if (on_close)
    on_close(why);
}

// -- dial ---------------------------------------------------------------------

namespace {

using done_fn = std::function<void(std::unique_ptr<upstream::connection>,
                                   const std::string& why)>;

// One dial in progress: resolve (a name only), connect, handshake, all
// under one deadline. Held by its caller; a resolver thread holds it weakly.
struct dialing : std::enable_shared_from_this<dialing> {
  dialing(net::io_context& ioc)
      : ioc(ioc)
      , deadline(ioc) {}

  net::io_context& ioc;
  net::steady_timer deadline;
  std::shared_ptr<ssl::context> tls;
  std::unique_ptr<upstream::connection> conn;
  std::string server_name;
  done_fn done;
  bool finished = false;
  const char* step = "resolve";

  void finish(std::unique_ptr<upstream::connection> c, const std::string& why) {
    if (finished)
      return;
    finished = true;
    deadline.cancel();
    auto d = std::move(done);
    d(std::move(c), why);
  }

  void start_deadline(duration timeout) {
    deadline.expires_after(timeout);
    deadline.async_wait([w = weak_from_this()](error_code ec) {
      auto self = w.lock();
      if (ec || !self || self->finished)
        return;
      // Closing the socket ends the connect or handshake in progress; its
      // handler then finds the dial finished.
      if (self->conn)
        self->conn->close();
      self->finish(nullptr, std::string{self->step} + " timed out");
    });
  }

  void connect(std::vector<tcp::endpoint> endpoints) {
    if (finished)
      return;
    step = "connect";
    conn = std::make_unique<upstream::connection>(ioc, tls.get());
    if (!conn->expect_peer(server_name, true))
      return finish(nullptr, "TLS settings refused (out of memory)");
    conn->tcp().async_connect(
        endpoints,
        [self = shared_from_this()](error_code ec, const tcp::endpoint&) {
          if (self->finished)
            return;
          if (ec)
            return self->finish(nullptr, "connect failed: " + ec.message());
          set_no_delay(self->conn->tcp().socket());
          self->step = "TLS handshake";
          self->conn->async_handshake([self](error_code ec) {
            if (self->finished)
              return;
            if (ec) {
              auto cert = self->conn->verify_failure();
              return self->finish(nullptr,
                                  "TLS handshake failed: " +
                                      (cert.empty() ? ec.message() : cert));
            }
            self->finish(std::move(self->conn), "");
          });
        });
  }
};

} // namespace

std::shared_ptr<void>
dial(net::io_context& ioc, std::shared_ptr<loop_door> door,
     std::shared_ptr<ssl::context> tls, const std::string& host, uint16_t port,
     const std::string& server_name, duration timeout, done_fn done) {
  auto d = std::make_shared<dialing>(ioc);
  d->tls = std::move(tls);
  d->server_name = server_name;
  d->done = std::move(done);
  d->start_deadline(timeout);
  error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (!ec) {
    d->connect({tcp::endpoint{address, port}});
    return d;
  }
  // A name: getaddrinfo on a thread of its own, which nobody joins (it
  // cannot be cancelled, and a stuck resolver must not hold the loop or its
  // shutdown); its answer comes back through the door to a dial still
  // held, or is dropped. NOTE: a resolver that hangs keeps that thread
  // (and a few hundred bytes) until it returns; the dial times out anyway.
  try {
    std::thread{[w = std::weak_ptr<dialing>(d), door, host, port] {
      std::vector<tcp::endpoint> found;
      std::string why;
      try {
        net::io_context own;
        tcp::resolver r{own};
        error_code rec;
        auto results = r.resolve(host, std::to_string(port), rec);
        for (auto& e : results)
          found.push_back(e.endpoint());
        if (rec)
          why = "cannot resolve '" + host + "': " + rec.message();
      } catch (const std::exception& e) {
        why = e.what();
      } catch (...) {
        why = "cannot resolve '" + host + "'";
      }
      door->post([w, found = std::move(found), why]() mutable {
        auto d = w.lock();
        if (!d)
          return;
        if (!why.empty() || found.empty())
          return d->finish(nullptr, why.empty() ? "no address" : why);
        d->connect(std::move(found));
      });
    }}.detach();
  } catch (const std::exception& e) {
    d->finish(nullptr, std::string{"cannot start the resolver: "} + e.what());
  }
  return d;
}

} // namespace sluice::remote
