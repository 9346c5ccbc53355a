// Time to the first event of a streamed answer, for bench/stream_compare.sh:
// one blocking keep-alive connection to 127.0.0.1:PORT, REQUESTS requests
// one after the other (after WARMUP unmeasured ones), each a POST of a
// streaming chat request to /v1/chat/completions. Per request it times, with
// steady_clock, from just before the request's send() to the recv() after
// which the answer's body first holds `data: ` (the first event's bytes),
// then reads the answer to its end (chunked: the last chunk `0\r\n\r\n`;
// or Content-Length; or, without either, the connection's end) before the
// next request. Connect time is not counted: the connection is made before
// the first request and kept (made again only when the server closes it
// after a complete answer; those are counted).
//
//   first_event PORT REQUESTS [EVENTS [WARMUP]]
//
// EVENTS (optional): the `data: ` lines each answer must hold (EVENTS
// events and `data: [DONE]`: EVENTS + 1); an answer with another count, a
// status other than 200, a broken answer or 10 s without a byte fails the
// run (a line on stderr, exit status 1). WARMUP: default 10.
// Prints one line: "p50_us p99_us min_us max_us requests reconnects".
// Built by bench/stream_compare.sh with `g++ -O2 -std=c++17`.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "parse_long.hpp"

using bench_args::parse_long;

namespace {

using steady = std::chrono::steady_clock;

// As the request of bench/stream_compare.sh (its `body`).
const std::string body =
    "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
    "\"content\":\"hi\"}]}";

[[noreturn]] void die(const char* what, const char* detail = nullptr) {
  std::fprintf(stderr, "first_event: %s%s%s\n", what, detail ? ": " : "",
               detail ? detail : "");
  std::exit(1);
}

int connect_to(long port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    die("socket", std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = 10;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    die("connect", std::strerror(errno));
  return fd;
}

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size())
    return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char a = line[i], b = name[i];
    if (a >= 'A' && a <= 'Z')
      a = static_cast<char>(a - 'A' + 'a');
    if (a != b)
      return false;
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

size_t count_of(std::string_view hay, std::string_view needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string_view::npos;
       p = hay.find(needle, p + needle.size()))
    ++n;
  return n;
}

// One answer read from the connection: its head, then its body decoded
// as it comes.
class reader {
public:
  explicit reader(int fd) : fd_(fd) {}

  // Receives once into `raw`; false at the connection's end. Stamps the
  // time the bytes came.
  bool receive() {
    char buf[16 * 1024];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        raw_.append(buf, static_cast<size_t>(n));
        at_ = steady::now();
        return true;
      }
      if (n == 0)
        return false;
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        die("no byte from the server for 10 s");
      die("recv", std::strerror(errno));
    }
  }

  // Reads one answer; `first` gets the time of the recv() after which
  // its body first held "data: ". False: the server closed the connection
  // before any byte of it (a kept connection it had ended).
  bool read_answer(steady::time_point& first, std::string& body_out,
                   bool& close_after) {
    bool seen = false;
    size_t searched = 0;
    body_out.clear();
    pos_ = 0;
    auto look = [&] {
      if (seen)
        return;
      size_t from = searched > 5 ? searched - 5 : 0;
      if (body_out.find("data: ", from) != std::string::npos) {
        seen = true;
        first = at_;
      }
      searched = body_out.size();
    };
    // The head.
    size_t end;
    while ((end = raw_.find("\r\n\r\n")) == std::string::npos) {
      if (!receive()) {
        if (raw_.empty())
          return false;
        die("the connection ended inside an answer's head");
      }
    }
    std::string_view head(raw_.data(), end);
    if (head.size() < 12 || head.substr(0, 5) != "HTTP/")
      die("not an HTTP answer");
    int status = std::atoi(std::string(head.substr(9, 3)).c_str());
    if (status != 200)
      die("HTTP status is not 200:", std::string(head.substr(0, 40)).c_str());
    bool chunked = false, have_length = false;
    size_t length = 0;
    close_after = head.substr(0, 8) == "HTTP/1.0";
    size_t p = head.find("\r\n");
    while (p != std::string_view::npos && p < head.size()) {
      size_t e = head.find("\r\n", p + 2);
      std::string_view line =
          head.substr(p + 2, (e == std::string_view::npos ? head.size() : e) -
                                 (p + 2));
      p = e;
      auto colon = line.find(':');
      if (colon == std::string_view::npos)
        continue;
      std::string value = lower(line.substr(colon + 1));
      if (iequals_prefix(line, "transfer-encoding:"))
        chunked = value.find("chunked") != std::string::npos;
      else if (iequals_prefix(line, "content-length:")) {
        have_length = true;
        length = std::strtoul(value.c_str(), nullptr, 10);
      } else if (iequals_prefix(line, "connection:")) {
        if (value.find("close") != std::string::npos)
          close_after = true;
        if (value.find("keep-alive") != std::string::npos)
          close_after = false;
      }
    }
    raw_.erase(0, end + 4);
    if (!raw_.empty()) { // body bytes came with the head
      if (!chunked)
        body_out.append(raw_.substr(0, have_length ? length : raw_.size()));
    }

    if (chunked) {
      // pos_: the next chunk's size line in `raw_`.
      for (;;) {
        // Decode what is there.
        for (;;) {
          size_t eol = raw_.find("\r\n", pos_);
          if (eol == std::string::npos)
            break;
          size_t size = std::strtoul(raw_.c_str() + pos_, nullptr, 16);
          if (size == 0) { // the last chunk: trailers up to an empty line
            // (no trailers: the size line's CRLF and the empty line's)
            size_t fin = raw_.find("\r\n\r\n", eol);
            if (fin == std::string::npos)
              break;
            raw_.erase(0, fin + 4);
            look();
            if (!seen)
              die("the answer ended without a `data: ` line");
            return true;
          }
          if (raw_.size() < eol + 2 + size + 2)
            break;
          body_out.append(raw_, eol + 2, size);
          pos_ = eol + 2 + size + 2;
        }
        look();
        if (pos_ > 0) {
          raw_.erase(0, pos_);
          pos_ = 0;
        }
        if (!receive())
          die("the connection ended inside a chunked answer");
        // the bytes just read may complete what was there: decode again
      }
    }
    look();
    if (have_length) {
      while (body_out.size() < length) {
        raw_.clear();
        if (!receive())
          die("the connection ended inside an answer");
        body_out.append(raw_.substr(0, length - body_out.size()));
        look();
      }
      raw_.clear(); // (a server sending more than that: ignored)
      if (!seen)
        die("the answer ended without a `data: ` line");
      return true;
    }
    // Neither: the answer ends with the connection.
    raw_.clear();
    while (receive()) {
      body_out.append(raw_);
      raw_.clear();
      look();
    }
    close_after = true;
    if (!seen)
      die("the answer ended without a `data: ` line");
    return true;
  }

  void reset(int fd) {
    fd_ = fd;
    raw_.clear();
    pos_ = 0;
  }

private:
  int fd_;
  std::string raw_;
  size_t pos_ = 0;
  steady::time_point at_{};
};

} // namespace

int main(int argc, char** argv) {
  long port = 0, requests = 0, events = -1, warmup = 10;
  if (argc < 3 || argc > 5 || !parse_long(argv[1], 1, 65535, port) ||
      !parse_long(argv[2], 1, 10000000, requests) ||
      (argc >= 4 && !parse_long(argv[3], 0, 1000000, events)) ||
      (argc >= 5 && !parse_long(argv[4], 0, 10000000, warmup))) {
    std::fprintf(stderr, "usage: %s PORT REQUESTS [EVENTS [WARMUP]]\n",
                 argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\n"
      "Host: 127.0.0.1:" + std::to_string(port) + "\r\n"
      "Content-Type: application/json\r\n"
      "Accept: text/event-stream\r\n"
      "Content-Length: " + std::to_string(body.size()) + "\r\n"
      "\r\n" + body;

  int fd = connect_to(port);
  reader rd(fd);
  std::vector<double> us;
  us.reserve(static_cast<size_t>(requests));
  long reconnects = 0;
  std::string answer;
  for (long k = 0; k < warmup + requests; ++k) {
    bool close_after = false;
    steady::time_point first{};
    steady::time_point t0{};
    for (int attempt = 0;; ++attempt) {
      t0 = steady::now();
      size_t done = 0;
      bool sent = true;
      while (done < request.size()) {
        ssize_t n = ::send(fd, request.data() + done, request.size() - done,
                           MSG_NOSIGNAL);
        if (n > 0) {
          done += static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR)
          continue;
        sent = false;
        break;
      }
      if (sent && rd.read_answer(first, answer, close_after))
        break;
      // The server had closed the kept connection: once more on a new one
      // (its connect is not timed: t0 is taken again).
      if (attempt > 0)
        die("the server closed a new connection without answering");
      ::close(fd);
      fd = connect_to(port);
      rd.reset(fd);
      ++reconnects;
    }
    if (events >= 0) {
      size_t got = count_of(answer, "data: ");
      if (got != static_cast<size_t>(events) + 1) {
        std::fprintf(stderr,
                     "first_event: an answer held %zu `data: ` lines, not "
                     "%ld (%ld events and [DONE])\n",
                     got, events + 1, events);
        return 1;
      }
    }
    if (k >= warmup)
      us.push_back(
          std::chrono::duration<double, std::micro>(first - t0).count());
    if (close_after) {
      ::close(fd);
      fd = connect_to(port);
      rd.reset(fd);
      ++reconnects;
    }
  }
  ::close(fd);

  std::sort(us.begin(), us.end());
  // Nearest rank.
  auto pct = [&](double q) {
    size_t rank = static_cast<size_t>(std::ceil(q * us.size()));
    if (rank < 1)
      rank = 1;
    return us[rank - 1];
  };
  std::printf("%.1f %.1f %.1f %.1f %zu %ld\n", pct(0.50), pct(0.99), us.front(),
              us.back(), us.size(), reconnects);
  return 0;
}
