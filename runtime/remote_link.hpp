#pragma once

// The transport of sources in other processes (runtime/remote_source.hpp):
// framed messages (runtime/remote_wire.hpp) over mutually authenticated
// TLS, on an Asio loop of the source's own (actors/loops/io_thread.hpp). Both
// sides use it: the node dials (`dial`), the served side accepts; either
// way a `link` carries frames once the handshake has verified the peer's
// certificate against the configured CA.
//
// Nothing here blocks: connect, handshake, reads and writes are Asio
// operations with deadlines, so a peer that never answers costs its own
// link a timer, never another source, the node's start or its shutdown.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/actors/upstream/connection.hpp"
#include "sluice/runtime/policy/time.hpp"
#include "sluice/runtime/remote_wire.hpp"

namespace sluice::remote {

/// What a link reads at once from its socket (one buffer per link).
constexpr size_t remote_read_chunk_bytes = 16 * 1024;

/// The most bytes queued for writing on one link; a peer that reads
/// slower than this is dropped (its attempts fail), never buffered for.
constexpr size_t max_remote_queued_bytes =
    2 * remote_wire::max_remote_frame_bytes;

/// The heartbeat on a link, and the silence after which it is dropped (a
/// link lost without a reset: a partition, a host powered off).
constexpr duration remote_heartbeat = std::chrono::seconds{1};
constexpr duration remote_link_timeout = std::chrono::seconds{5};

/// The certificates of one side. Both sides name the CA that signs the
/// other side's certificate, and their own certificate and key: the
/// server requires and verifies the client's certificate, the client the
/// server's certificate and name.
struct tls_files {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

/// The served side's TLS context: TLS 1.2 or later, its certificate and
/// key, and a client certificate by `ca_file` required. Throws
/// `std::invalid_argument("FIELD: problem")` (FIELD: `ca_file`,
/// `cert_file`, `key_file`) for a file that cannot be read or used.
std::shared_ptr<boost::asio::ssl::context>
make_server_tls_context(const tls_files& files);

/// The node's TLS context: TLS 1.2 or later, the server verified against
/// `ca_file`, its certificate and key presented. Throws as above.
std::shared_ptr<boost::asio::ssl::context>
make_client_tls_context(const tls_files& files);

/// Posts work to a loop that may have stopped: once `close`d, or once the
/// loop's life token (a loop of the node's loop scheduler) says it is gone,
/// a post is dropped. CAF actors hold one to reach their link; a loop's
/// owner closes it before it stops the loop, so nothing is posted to a loop
/// being destroyed.
class loop_door {
public:
  explicit loop_door(boost::asio::io_context& ioc,
                     std::shared_ptr<loop_life> life = nullptr)
      : ioc_(&ioc)
      , life_(std::move(life)) {}

  template <class F>
  bool post(F&& f) {
    std::lock_guard<std::mutex> guard{mx_};
    if (ioc_ == nullptr)
      return false;
    if (life_) {
      std::lock_guard<std::mutex> alive{life_->mx};
      if (!life_->alive)
        return false;
      boost::asio::post(*ioc_, std::forward<F>(f));
      return true;
    }
    boost::asio::post(*ioc_, std::forward<F>(f));
    return true;
  }

  void close() {
    std::lock_guard<std::mutex> guard{mx_};
    ioc_ = nullptr;
  }

private:
  std::mutex mx_;
  boost::asio::io_context* ioc_;
  std::shared_ptr<loop_life> life_;
};

/// One authenticated connection carrying frames. Runs on its loop's
/// thread only; owned by shared_ptr (its handlers hold it).
class link : public std::enable_shared_from_this<link> {
public:
  using on_frame_fn = std::function<void(remote_wire::frame&&)>;
  using on_close_fn = std::function<void(const std::string& why)>;

  /// `conn` has completed its TLS handshake.
  link(std::unique_ptr<upstream::connection> conn, on_frame_fn on_frame,
       on_close_fn on_close);

  /// Starts reading and the heartbeat.
  void start();

  /// Queues a whole frame (remote_wire::encode...). Dropped on a closed
  /// link; closes a link whose peer leaves too much unread.
  void send(std::string frame);

  /// Closes the connection at once; `on_close` runs once, with `why`.
  void close(const std::string& why);

  bool open() const noexcept { return open_; }

  /// Frames received whole (tests).
  uint64_t frames_in() const noexcept { return frames_in_; }

private:
  void read();
  void write();
  void tick();

  std::unique_ptr<upstream::connection> conn_;
  on_frame_fn on_frame_;
  on_close_fn on_close_;
  boost::asio::steady_timer heartbeat_;
  remote_wire::frame_decoder decoder_;
  std::array<char, remote_read_chunk_bytes> in_{};
  std::deque<std::string> out_;
  size_t queued_ = 0;
  bool writing_ = false;
  bool open_ = true;
  std::chrono::steady_clock::time_point last_read_;
  uint64_t frames_in_ = 0;
};

/// Dials `host:port` and runs the TLS client handshake, expecting the
/// server's certificate to name `server_name`; all within `timeout`.
/// Calls `done(connection, "")` on success, `done(nullptr, why)` otherwise,
/// on the loop, once -- as long as the returned handle is held (drop it to
/// abandon the dial). A host name is resolved on a thread of its own
/// (getaddrinfo cannot be cancelled; the loop never waits for it).
std::shared_ptr<void>
dial(boost::asio::io_context& ioc, std::shared_ptr<loop_door> door,
     std::shared_ptr<boost::asio::ssl::context> tls, const std::string& host,
     uint16_t port, const std::string& server_name, duration timeout,
     std::function<void(std::unique_ptr<upstream::connection>,
                        const std::string& why)>
         done);

} // namespace sluice::remote
