#include "sluice/runtime/config/file_snapshot.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sluice::config {

namespace {

std::string quoted(const std::string& path) {
  return "'" + path + "'";
}

[[noreturn]] void refuse(const std::string& what) {
  throw std::invalid_argument(what);
}

[[noreturn]] void refuse_errno(const std::string& path, int err) {
  refuse("cannot read " + quoted(path) + ": " + std::strerror(err));
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

// Only a regular file has a size and an end: a FIFO or a device may block
// a read forever or never end.
void require_regular(const std::string& path, const struct stat& st,
                     size_t limit) {
  if (!S_ISREG(st.st_mode))
    refuse(quoted(path) + " is " + kind_of(st.st_mode) +
           ", not a regular file");
  if (static_cast<unsigned long long>(st.st_size) > limit)
    refuse(quoted(path) + " is larger than " + std::to_string(limit) +
           " bytes");
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// The same file in the same state, as far as fstat() tells.
bool same_state(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
         a.st_size == b.st_size && same_time(a.st_mtim, b.st_mtim) &&
         same_time(a.st_ctim, b.st_ctim);
}

struct read_result {
  std::string bytes;
  struct stat st {};
  /// Nothing changed the file during the read.
  bool steady = false;
};

class descriptor {
public:
  explicit descriptor(int fd) : fd_(fd) {}
  ~descriptor() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  int get() const noexcept { return fd_; }

private:
  int fd_;
};

read_result read_once(const std::string& path, size_t limit,
                      const file_read_hooks& hooks) {
  // stat() first: a FIFO or a device is refused without being opened
  // (opening one may block, or do something: a tape rewinds).
  struct stat before {};
  if (::stat(path.c_str(), &before) != 0)
    refuse_errno(path, errno);
  require_regular(path, before, limit);
  // O_NONBLOCK: the path may have been replaced by a FIFO since.
  descriptor fd{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC |
                                         O_NOCTTY)};
  if (fd.get() < 0)
    refuse_errno(path, errno);
  read_result out;
  if (::fstat(fd.get(), &out.st) != 0)
    refuse_errno(path, errno);
  require_regular(path, out.st, limit);
  // One byte more than the limit tells a file that grew past it.
  out.bytes.resize(limit + 1);
  size_t got = 0;
  while (got < out.bytes.size()) {
    auto n = ::read(fd.get(), out.bytes.data() + got, out.bytes.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      refuse_errno(path, errno);
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  out.bytes.resize(got);
  if (hooks.after_read)
    hooks.after_read();
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0)
    refuse_errno(path, errno);
  out.steady = got <= limit && same_state(out.st, after) &&
               static_cast<unsigned long long>(after.st_size) == got;
  return out;
}

// How long until the file's last change is `file_settle_time` old (zero if
// it is; at most that time, whatever the clocks say).
std::chrono::nanoseconds settle_left(const struct stat& st) {
  auto changed = std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds{st.st_mtim.tv_sec} +
          std::chrono::nanoseconds{st.st_mtim.tv_nsec})};
  auto age = std::chrono::system_clock::now() - changed;
  auto left = std::chrono::nanoseconds{file_settle_time} - age;
  if (left <= std::chrono::nanoseconds::zero())
    return std::chrono::nanoseconds::zero();
  return std::min<std::chrono::nanoseconds>(left, file_settle_time);
}

} // namespace

std::string read_file_snapshot(const std::string& path, size_t limit,
                               const file_read_hooks& hooks) {
  for (int i = 0; i < file_read_tries; ++i) {
    auto first = read_once(path, limit, hooks);
    if (!first.steady) {
      // Written to now: give the writer the time a settled file has.
      std::this_thread::sleep_for(file_settle_time);
      continue;
    }
    // A young file may be between two steps of a writer: read it again
    // once it is old enough to be trusted.
    std::this_thread::sleep_for(settle_left(first.st));
    if (hooks.between_reads)
      hooks.between_reads();
    auto second = read_once(path, limit, hooks);
    if (second.steady && same_state(first.st, second.st) &&
        first.bytes == second.bytes)
      return std::move(second.bytes);
  }
  refuse(quoted(path) + ": " + file_changed_text);
}

} // namespace sluice::config
