// A small, fast streaming upstream for bench/stream_compare.sh: one thread,
// epoll, HTTP/1.1 keep-alive, plain POSIX. Every request (any method, any
// path) is answered with a `text/event-stream` of EVENTS OpenAI-shaped
// `chat.completion.chunk` events and `data: [DONE]`, chunked:
//
//   send 1:      the response head + event 1 as one chunk
//   send 2..N:   event k as one chunk (one send() each, TCP_NODELAY: each
//                leaves as its own segment, as tokens from a model would)
//   send N+1:    `data: [DONE]` as one chunk + the last chunk `0\r\n\r\n`
//
// With GAP_US > 0 the sends of one answer are paced: send 1 goes at once
// (the head with event 1), each later send GAP_US microseconds after the
// one before (events 2..N, then the [DONE] send), as a model's tokens
// would come. The server stays one thread that never sleeps: a paced
// connection waits in a queue of due times (in order, as every wait is
// the same GAP_US), and one timerfd, armed to the earliest of them, wakes
// the epoll loop. While its answer is paced, a connection reads no further
// requests (they wait in the socket until the answer is done).
//
// A send that would block (the client does not read) keeps what is left in
// the connection's buffer, which is written on EPOLLOUT; meanwhile the
// connection reads no further requests, and other connections go on (a
// paced answer's next events join that buffer when due).
// Requests: the head up to CRLF CRLF (at most 64 KiB) and a Content-Length
// body (at most 1 MiB); a connection breaking these limits, or sending a
// chunked body, is closed. `Connection: close` (or HTTP/1.0 without
// keep-alive) closes the connection once its answer is written.
//
//   sse_upstream PORT EVENTS [GAP_US]    listens on 127.0.0.1:PORT;
//                                        GAP_US default 0: no pacing
//
// SIGTERM or SIGINT: closes every connection and exits with status 0.
// Built by bench/stream_compare.sh with `g++ -O2 -std=c++17`.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sse_upstream_parts.hpp"

namespace {

using namespace sse_bench;

class server {
public:
  server(int listener, int sigfd, long events, long gap_us)
      : listener_(listener)
      , sigfd_(sigfd)
      , answer_(make_answer(events))
      , gap_ns_(static_cast<long long>(gap_us) * 1000) {}

  int run() {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0)
      return fail("epoll_create1");
    if (!watch(listener_, EPOLLIN, EPOLL_CTL_ADD) ||
        !watch(sigfd_, EPOLLIN, EPOLL_CTL_ADD))
      return fail("epoll_ctl");
    if (gap_ns_ > 0) {
      timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
      if (timer_ < 0)
        return fail("timerfd_create");
      if (!watch(timer_, EPOLLIN, EPOLL_CTL_ADD))
        return fail("epoll_ctl");
    }
    std::vector<epoll_event> ready(256);
    for (;;) {
      int n = epoll_wait(ep_, ready.data(), static_cast<int>(ready.size()), -1);
      if (n < 0) {
        if (errno == EINTR)
          continue;
        return fail("epoll_wait");
      }
      for (int i = 0; i < n; ++i) {
        int fd = ready[i].data.fd;
        uint32_t ev = ready[i].events;
        if (fd == sigfd_) {
          shutdown_all();
          return 0;
        }
        if (fd == listener_) {
          accept_all();
          continue;
        }
        if (fd == timer_ && timer_ >= 0) {
          on_timer();
          continue;
        }
        on_event(fd, ev);
      }
    }
  }

private:
  static int fail(const char* what) {
    std::fprintf(stderr, "sse_upstream: %s: %s\n", what, std::strerror(errno));
    return 1;
  }

  bool watch(int fd, uint32_t events, int op) {
    epoll_event e{};
    e.events = events;
    e.data.fd = fd;
    return epoll_ctl(ep_, op, fd, &e) == 0;
  }

  void accept_all() {
    for (;;) {
      int fd =
          accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
          std::fprintf(stderr, "sse_upstream: accept: %s\n",
                       std::strerror(errno));
        return;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (!watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD)) {
        ::close(fd);
        continue;
      }
      if (static_cast<size_t>(fd) >= conns_.size())
        conns_.resize(static_cast<size_t>(fd) + 64);
      conns_[fd] = std::make_unique<connection>();
      conns_[fd]->fd = fd;
      conns_[fd]->id = ++last_id_;
    }
  }

  void drop(int fd) {
    epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns_[fd].reset();
  }

  void shutdown_all() {
    for (auto& c : conns_)
      if (c)
        drop(c->fd);
    ::close(listener_);
    if (timer_ >= 0)
      ::close(timer_);
    ::close(ep_);
  }

  void on_event(int fd, uint32_t ev) {
    if (static_cast<size_t>(fd) >= conns_.size() || !conns_[fd])
      return;
    connection& c = *conns_[fd];
    if (ev & EPOLLERR) {
      drop(fd);
      return;
    }
    if (c.writing) {
      if (ev & EPOLLHUP) {
        drop(fd);
        return;
      }
      if (ev & EPOLLOUT)
        flush(c);
      return;
    }
    if (c.pending > 0) { // between paced sends: epoll waits for nothing
      if (ev & EPOLLHUP) // but the peer's reset (and errors)
        drop(fd);
      return;
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
      read_some(c);
  }

  // Reads what there is, then answers every complete request in `in`.
  void read_some(connection& c) {
    const int fd = c.fd;
    for (;;) {
      size_t old = c.in.size();
      c.in.resize(old + read_chunk);
      ssize_t n = ::recv(fd, &c.in[old], read_chunk, 0);
      if (n > 0) {
        c.in.resize(old + static_cast<size_t>(n));
        if (static_cast<size_t>(n) < read_chunk)
          break;
        // The buffer could hold more: bound what one connection takes in
        // before answering (a client sending a large head or body).
        if (c.in.size() - c.in_pos > max_head_bytes + max_body_bytes + 4)
          break;
        continue;
      }
      c.in.resize(old);
      if (n == 0) { // the peer closed (or half-closed its side): answer
        c.close_after = true; // what came before, then close
        break;
      }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      drop(fd);
      return;
    }
    serve(c);
    // At the peer's end of input (close_after) with nothing left to write:
    // serve() answered what there was, the connection ends here.
    if (conns_[fd] && c.close_after && !c.writing && c.pending == 0)
      drop(fd);
  }

  // Answers the complete requests in `in` until one answer is left waiting
  // for EPOLLOUT or paced. Drops the connection on a broken or oversized
  // request.
  void serve(connection& c) {
    const int fd = c.fd;
    while (!c.writing && c.pending == 0) {
      std::string_view buffered(c.in);
      buffered.remove_prefix(c.in_pos);
      size_t from = c.scanned > 3 ? c.scanned - 3 : 0;
      auto end = buffered.find("\r\n\r\n", from);
      if (end == std::string_view::npos) {
        if (buffered.size() > max_head_bytes) {
          drop(fd);
          return;
        }
        c.scanned = buffered.size();
        break;
      }
      if (end + 4 > max_head_bytes) {
        drop(fd);
        return;
      }
      head_info h = parse_head(buffered.substr(0, end + 2));
      if (!h.ok) {
        drop(fd);
        return;
      }
      size_t total = end + 4 + h.body;
      if (buffered.size() < total) {
        c.scanned = end; // the head is found again next time, cheaply
        break;
      }
      c.in_pos += total;
      c.scanned = 0;
      if (h.close)
        c.close_after = true;
      if (!answer_request(c))
        return; // dropped
      if (c.close_after) {
        if (!c.writing && c.pending == 0)
          drop(fd);
        return;
      }
    }
    // Keep the buffer small: move what is left to its start.
    if (c.in_pos > 0 && (c.in_pos == c.in.size() || c.in_pos > 64 * 1024)) {
      c.in.erase(0, c.in_pos);
      c.in_pos = 0;
    }
  }

  // Sends the answer, one send() per piece, or (paced) its first piece,
  // the others coming from on_timer(); false when the connection was
  // dropped.
  bool answer_request(connection& c) {
    if (!send_piece(c, answer_.first))
      return false;
    if (gap_ns_ > 0) {
      // Events 2..N and [DONE], one per gap. Until they are sent epoll
      // waits for nothing on the connection (unless a send blocked: then
      // for EPOLLOUT), so that no further request is read meanwhile.
      c.pending = answer_.events > 0 ? answer_.events : 1;
      if (!c.writing && !watch(c.fd, 0, EPOLL_CTL_MOD)) {
        drop(c.fd);
        return false;
      }
      schedule(c, now_ns());
      return true;
    }
    for (long k = 1; k < answer_.events; ++k)
      if (!send_piece(c, answer_.middle))
        return false;
    return send_piece(c, answer_.last);
  }

  // The next paced send of `c`, GAP_US after `now`. Every wait is the
  // same GAP_US and `now` never goes back, so the queue stays in order of
  // due time; the timer is armed when it was empty (otherwise it already
  // is, to an earlier time).
  void schedule(connection& c, long long now) {
    bool was_empty = due_.empty();
    due_.push_back(timed{c.fd, c.id, now + gap_ns_});
    if (was_empty)
      arm(due_.front().at);
  }

  void arm(long long at) {
    itimerspec t{};
    t.it_value.tv_sec = static_cast<time_t>(at / 1000000000LL);
    t.it_value.tv_nsec = static_cast<long>(at % 1000000000LL);
    if (timerfd_settime(timer_, TFD_TIMER_ABSTIME, &t, nullptr) != 0)
      std::fprintf(stderr, "sse_upstream: timerfd_settime: %s\n",
                   std::strerror(errno));
  }

  // The timer fired: one paced send of every connection now due.
  void on_timer() {
    uint64_t expirations;
    while (::read(timer_, &expirations, sizeof expirations) < 0 &&
           errno == EINTR) {
    }
    const long long now = now_ns();
    // Only what was due before this round: connections scheduled in it
    // go to the back, due a whole gap later.
    size_t n = due_.size();
    while (n > 0 && due_.front().at <= now) {
      timed t = due_.front();
      due_.pop_front();
      --n;
      if (static_cast<size_t>(t.fd) >= conns_.size() || !conns_[t.fd] ||
          conns_[t.fd]->id != t.id || conns_[t.fd]->pending == 0)
        continue; // dropped meanwhile (its descriptor maybe reused)
      paced_send(*conns_[t.fd], now);
    }
    if (!due_.empty())
      arm(due_.front().at);
  }

  // The next piece of `c`'s paced answer; at its end, `c` reads requests
  // again (once what is buffered is written).
  void paced_send(connection& c, long long now) {
    const int fd = c.fd;
    bool last = c.pending == 1;
    if (!send_piece(c, last ? answer_.last : answer_.middle))
      return; // dropped
    --c.pending;
    if (!last) {
      schedule(c, now);
      return;
    }
    if (c.writing)
      return; // flush() goes on when the rest is written
    if (c.close_after) {
      drop(fd);
      return;
    }
    if (!watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD)) {
      drop(fd);
      return;
    }
    serve(c); // requests that came in meanwhile and were read before
  }

  // One send() of `piece`, or its rest to `out` when the socket is full
  // (and everything after it, in order, until `out` is written).
  bool send_piece(connection& c, const std::string& piece) {
    if (c.writing) {
      c.out.append(piece);
      return true;
    }
    size_t done = 0;
    while (done < piece.size()) {
      ssize_t n =
          ::send(c.fd, piece.data() + done, piece.size() - done, MSG_NOSIGNAL);
      if (n >= 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c.out.assign(piece, done, std::string::npos);
        c.out_pos = 0;
        c.writing = true;
        if (!watch(c.fd, EPOLLOUT, EPOLL_CTL_MOD)) {
          drop(c.fd);
          return false;
        }
        return true;
      }
      drop(c.fd);
      return false;
    }
    return true;
  }

  // EPOLLOUT: writes what is left; once all is out, reads again (and
  // answers requests that came in meanwhile).
  void flush(connection& c) {
    const int fd = c.fd;
    while (c.out_pos < c.out.size()) {
      ssize_t n = ::send(fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos,
                         MSG_NOSIGNAL);
      if (n >= 0) {
        c.out_pos += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return;
      drop(fd);
      return;
    }
    c.out.clear();
    c.out.shrink_to_fit();
    c.out_pos = 0;
    c.writing = false;
    if (c.pending > 0) { // a paced answer goes on: wait for its timer
      if (!watch(fd, 0, EPOLL_CTL_MOD))
        drop(fd);
      return;
    }
    if (c.close_after) {
      drop(fd);
      return;
    }
    if (!watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD)) {
      drop(fd);
      return;
    }
    serve(c);
  }

  // A paced connection's next send: connection `id` on descriptor `fd`,
  // due at `at` (CLOCK_MONOTONIC, ns).
  struct timed {
    int fd;
    unsigned long id;
    long long at;
  };

  int listener_;
  int sigfd_;
  int ep_ = -1;
  int timer_ = -1; // timerfd, with GAP_US > 0
  answer answer_;
  long long gap_ns_;
  unsigned long last_id_ = 0;
  std::deque<timed> due_; // in order of `at`
  std::vector<std::unique_ptr<connection>> conns_;
};

} // namespace

int main(int argc, char** argv) {
  long port = 0, events = 0, gap_us = 0;
  if (!parse_arguments(argc, argv, port, events, gap_us))
    return 2;
  // Paced: the timer fires when due, not up to the default 50 us later.
  if (gap_us > 0)
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

  // Many connections at once: as many descriptors as allowed.
  raise_descriptor_limit();

  // SIGTERM and SIGINT arrive as a readable descriptor in the loop.
  int sigfd = signal_descriptor();
  if (sigfd < 0)
    return 1;
  signal(SIGPIPE, SIG_IGN);

  int fd = listen_loopback(port);
  if (fd < 0)
    return 1;
  std::fprintf(stderr,
               "sse_upstream: 127.0.0.1:%ld, %ld events per answer, %ld us "
               "between sends\n",
               port, events, gap_us);
  server s(fd, sigfd, events, gap_us);
  int rc = s.run();
  ::close(sigfd);
  return rc;
}
