// The parts of bench/sse_upstream.cpp around its server loop, header-only:
// the answer's pieces (built once), a connection's buffers, what a request
// head says about its framing, and the process's setup (its signals, its
// listening socket). Built with it by bench/stream_compare.sh.

#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "parse_long.hpp"

namespace sse_bench {

constexpr size_t max_head_bytes = 64 * 1024;
constexpr size_t max_body_bytes = 1024 * 1024;
constexpr size_t read_chunk = 16 * 1024;

// The answer's pieces, built once: `first` (head + event 1), `middle` (an
// event, sent for events 2..N) and `last` ([DONE] + the last chunk).
struct answer {
  std::string first;
  std::string middle;
  std::string last;
  long events = 0;
};

inline std::string as_chunk(std::string_view data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out = size;
  out.append(data);
  out.append("\r\n");
  return out;
}

inline answer make_answer(long events) {
  const std::string event =
      "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\","
      "\"created\":1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,"
      "\"delta\":{\"content\":\"tok\"},\"finish_reason\":null}]}\n\n";
  const std::string head = "HTTP/1.1 200 OK\r\n"
                           "Content-Type: text/event-stream\r\n"
                           "Cache-Control: no-cache\r\n"
                           "Transfer-Encoding: chunked\r\n"
                           "\r\n";
  answer a;
  a.events = events;
  a.middle = as_chunk(event);
  a.first = head;
  if (events > 0)
    a.first += a.middle;
  a.last = as_chunk("data: [DONE]\n\n") + "0\r\n\r\n";
  return a;
}

struct connection {
  int fd = -1;
  unsigned long id = 0;     // unique per connection (a descriptor is reused)
  std::string in;           // bytes read, from `in_pos` on not yet consumed
  size_t in_pos = 0;        // start of the current request in `in`
  size_t scanned = 0;       // `in` from in_pos up to here holds no CRLF CRLF
  std::string out;          // bytes a send could not take yet
  size_t out_pos = 0;       // the first of them not yet sent
  bool writing = false;     // epoll waits for EPOLLOUT (not EPOLLIN)
  bool close_after = false; // close once `out` is empty
  long pending = 0;         // paced answer: sends still to come (events 2..N
                            // and [DONE]); > 0: waiting in the timer queue
};

inline long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z')
      x = x - 'A' + 'a';
    if (y >= 'A' && y <= 'Z')
      y = y - 'A' + 'a';
    if (x != y)
      return false;
  }
  return true;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// True when `list` (a comma-separated header value) holds `token`.
inline bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = trim(list.substr(0, comma));
    if (iequals(item, token))
      return true;
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// What a request head says about the request's framing.
struct head_info {
  bool ok = false;    // false: close the connection
  size_t body = 0;    // Content-Length
  bool close = false; // close the connection after the answer
};

inline head_info parse_head(std::string_view head) {
  head_info h;
  auto eol = head.find("\r\n");
  auto request_line = head.substr(0, eol);
  auto sp = request_line.rfind(' ');
  if (sp == std::string_view::npos)
    return h;
  auto version = request_line.substr(sp + 1);
  bool http10 = version == "HTTP/1.0";
  if (!http10 && version != "HTTP/1.1")
    return h;
  bool keep_alive = false;
  bool have_length = false;
  size_t pos = eol == std::string_view::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    auto end = head.find("\r\n", pos);
    if (end == std::string_view::npos)
      end = head.size();
    auto line = head.substr(pos, end - pos);
    pos = end + 2;
    auto colon = line.find(':');
    if (colon == std::string_view::npos)
      continue;
    auto name = line.substr(0, colon);
    auto value = trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      if (value.empty() || value.size() > 9)
        return h; // also: more than max_body_bytes
      size_t n = 0;
      for (char c : value) {
        if (c < '0' || c > '9')
          return h;
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (have_length && n != h.body)
        return h;
      have_length = true;
      h.body = n;
    } else if (iequals(name, "transfer-encoding")) {
      return h; // a chunked request body: not ours to read
    } else if (iequals(name, "connection")) {
      if (has_token(value, "close"))
        h.close = true;
      if (has_token(value, "keep-alive"))
        keep_alive = true;
    }
  }
  if (h.body > max_body_bytes)
    return h;
  if (http10 && !keep_alive)
    h.close = true;
  h.ok = true;
  return h;
}

using bench_args::parse_long;

// PORT EVENTS [GAP_US] from the command line, or false (the usage said on
// stderr).
inline bool parse_arguments(int argc, char** argv, long& port, long& events,
                            long& gap_us) {
  if ((argc == 3 || argc == 4) && parse_long(argv[1], 1, 65535, port) &&
      parse_long(argv[2], 0, 1000000, events) &&
      (argc == 3 || parse_long(argv[3], 0, 60000000, gap_us)))
    return true;
  std::fprintf(stderr,
               "usage: %s PORT EVENTS [GAP_US]   (PORT 1-65535, "
               "EVENTS 0-1000000, GAP_US 0-60000000 microseconds "
               "between the sends of an answer, default 0; "
               "listens on 127.0.0.1:PORT)\n",
               argv[0]);
  return false;
}

// The soft limit of descriptors raised to the hard one.
inline void raise_descriptor_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// SIGTERM and SIGINT, blocked, as a readable descriptor; -1 (said on
// stderr) when that cannot be set up.
inline int signal_descriptor() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    std::perror("sse_upstream: sigprocmask");
    return -1;
  }
  int sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd < 0)
    std::perror("sse_upstream: signalfd");
  return sigfd;
}

// A non-blocking socket listening on 127.0.0.1:`port`; -1 (said on stderr)
// when it cannot be.
inline int listen_loopback(long port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::perror("sse_upstream: socket");
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "sse_upstream: bind 127.0.0.1:%ld: %s\n", port,
                 std::strerror(errno));
    ::close(fd);
    return -1;
  }
  if (listen(fd, 4096) != 0) {
    std::perror("sse_upstream: listen");
    ::close(fd);
    return -1;
  }
  return fd;
}

} // namespace sse_bench
