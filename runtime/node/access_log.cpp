#include "sluice/runtime/node/access_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sluice/actors/log.hpp"
#include "sluice/actors/loops/loop_guard.hpp"
#include "sluice/runtime/node/responses.hpp"

namespace sluice::node {

namespace {

std::string utc_text(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                t.time_since_epoch())
                .count();
  auto secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

json text_or_null(const std::string& s, size_t limit = max_logged_id_bytes) {
  return s.empty() ? json(nullptr) : json(cut_field(s, limit));
}

bool continuation_byte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

/// The file descriptor `target` is written through: stdout's (not ours to
/// close), or the file opened for appending.
int open_target(const std::string& target) {
  if (target == "stdout")
    return STDOUT_FILENO;
  // An open(2) for writing blocks on a FIFO until someone reads it: the
  // start, or the signal thread reopening the log, would hang with it.
  // Opened without blocking, and only a regular file (or a device such as
  // /dev/null) is kept; the file is created here if it is missing.
  auto usable = [](const struct stat& st) {
    return S_ISREG(st.st_mode) || S_ISCHR(st.st_mode);
  };
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !usable(st))
    throw std::runtime_error("the access log '" + target +
                             "' is not a regular file (a FIFO or socket "
                             "would block the node; \"stdout\" writes to "
                             "the standard output)");
  // O_APPEND: see `access_log::reopen`.
  int fd = ::open(target.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open the access log '" + target +
                             "': " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !usable(st)) { // swapped meanwhile?
    ::close(fd);
    throw std::runtime_error("the access log '" + target +
                             "' is not a regular file (a FIFO or socket "
                             "would block the node; \"stdout\" writes to "
                             "the standard output)");
  }
  return fd;
}

/// What an entry counts against `max_queued_bytes`: itself and its text.
size_t queued_size(const access_record& r, const std::string& text) {
  return sizeof(access_record) + r.request_id.size() + r.method.size() +
         r.path.size() + r.model.size() + r.key.size() + r.error.size() +
         r.source.size() + text.size();
}

log_limit write_failure_log{3, std::chrono::seconds{60}};

double ms_of(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

} // namespace

std::string cut_field(std::string_view text, size_t limit) {
  if (text.size() <= limit)
    return std::string{text};
  auto keep = limit;
  // Back to the start of the sequence the limit falls in (at most 3
  // continuation bytes): no half character before the mark.
  for (int i = 0; i < 3 && keep > 0 && continuation_byte(text[keep]); ++i)
    --keep;
  if (continuation_byte(text[keep]))
    keep = limit; // not UTF-8 there anyway: the JSON writer replaces it
  return std::string{text.substr(0, keep)} + "\u2026[cut " +
         std::to_string(text.size() - keep) + " bytes]";
}

void clear_record(access_record& r) noexcept {
  // Every field of access_record (the test compares with a new one).
  r.time = {};
  r.request_id.clear();
  r.method.clear();
  r.path.clear();
  r.model.clear();
  r.key.clear();
  r.status = 0;
  r.error.clear();
  r.source.clear();
  r.attempts = 0;
  r.hedged = 0;
  r.won_attempt = 0;
  r.total = {};
  r.upstream = {};
  r.suppressed = 0;
  r.usage.reset();
  r.cost.reset();
  r.tool.clear();
  r.mcp_server.clear();
  r.rpc_id.clear();
  r.rpc_error = 0;
}

std::string access_line(const access_record& r) {
  auto overhead = std::max(r.total - r.upstream, duration::zero());
  json line{
      {"time", utc_text(r.time)},
      {"request_id", text_or_null(r.request_id)},
      {"method", cut_field(r.method, max_logged_method_bytes)},
      {"path", cut_field(r.path, max_logged_path_bytes)},
      {"model", text_or_null(r.model)},
      {"key", text_or_null(r.key)},
      {"status", r.status},
      {"error", text_or_null(r.error)},
      {"source", text_or_null(r.source)},
      {"attempts", r.attempts},
      {"hedged", r.hedged},
      {"won_attempt", r.won_attempt == 0 ? json(nullptr) : json(r.won_attempt)},
      {"total_ms", std::round(ms_of(r.total) * 1000) / 1000},
      {"upstream_ms", std::round(ms_of(r.upstream) * 1000) / 1000},
      {"overhead_us",
       std::chrono::duration_cast<std::chrono::microseconds>(overhead)
           .count()}};
  if (r.suppressed > 0)
    line["suppressed"] = r.suppressed;
  if (!r.rpc_id.empty()) {
    line["rpc_id"] = cut_field(r.rpc_id, max_logged_path_bytes);
    line["tool"] = text_or_null(r.tool);
    line["mcp_server"] = text_or_null(r.mcp_server);
    line["rpc_error"] = r.rpc_error == 0 ? json(nullptr) : json(r.rpc_error);
  }
  if (r.usage) {
    line["prompt_tokens"] = r.usage->prompt;
    line["completion_tokens"] = r.usage->completion;
    line["cached_tokens"] = r.usage->cached_prompt;
    line["usage_estimated"] = r.usage->estimated;
    line["cost_usd"] =
        r.cost ? json(policy::to_dollars(*r.cost)) : json(nullptr);
  }
  return json_text(line);
}

access_log::access_log(const std::string& target, access_log_options options)
    : target_(target)
    , options_(std::move(options))
    , sampler_(steady::now()) {
  if (target == "off")
    return;
  fd_ = open_target(target);
  owns_fd_ = fd_ != STDOUT_FILENO;
  try {
    writer_ = std::thread([this] { run(); });
  } catch (...) {
    if (owns_fd_)
      ::close(fd_);
    throw;
  }
  enabled_ = true;
}

access_log::~access_log() {
  if (!enabled_)
    return;
  assert_not_on_loop("access log: stopping its writer");
  {
    std::lock_guard<std::mutex> guard{mx_};
    // The count of a flood's last lines left out, which no later line
    // carries.
    if (sampler_.suppressed() > 0) {
      try {
        entry e{entry::kind::text, {}, {}, -1};
        e.text =
            json_text({{"time", utc_text(std::chrono::system_clock::now())},
                       {"suppressed", sampler_.take_suppressed()}});
        queue_.push_back(std::move(e));
        ++queued_seq_;
      } catch (...) {
        // no memory: that count is lost, nothing more to do about it
      }
    }
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join(); // it writes everything queued first
  if (owns_fd_)
    ::close(fd_);
}

void access_log::write(const access_record& r) noexcept {
  if (!enabled_)
    return;
  try {
    // Copied before the lock: the critical section allocates nothing
    // unless the queue's storage grows.
    entry e{entry::kind::record, r, {}, -1};
    auto size = queued_size(e.record, e.text);
    auto now = steady::now();
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{mx_};
      if (!sampler_.admit(r.status, !r.key.empty(), now)) {
        ++suppressed_total_;
        return;
      }
      if (queue_.size() >= options_.max_queued_lines ||
          queued_bytes_ + size > options_.max_queued_bytes) {
        // The sampler's count stays with it, for the next line queued.
        dropped_total_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      e.record.suppressed = sampler_.take_suppressed();
      // The writer sleeps until the interval ends unless a batch is full.
      wake =
          queue_.empty() || (queued_bytes_ < access_write_batch_bytes &&
                             queued_bytes_ + size >= access_write_batch_bytes);
      queue_.push_back(std::move(e));
      queued_bytes_ += size;
      ++queued_seq_;
    }
    if (wake)
      wake_.notify_one();
  } catch (...) {
    // A line that cannot be queued (no memory) is lost, not the request.
  }
}

bool access_log::reopen() noexcept {
  if (!enabled_ || target_ == "stdout")
    return true;
  try {
    entry e{entry::kind::switch_file, {}, {}, open_target(target_)};
    {
      std::lock_guard<std::mutex> guard{mx_};
      try {
        // Past the bounds: a reopen is never dropped.
        queue_.push_back(std::move(e));
      } catch (...) {
        ::close(e.fd);
        throw;
      }
      ++queued_seq_;
      flush_asked_ = true; // switch soon: the operator waits for the file
    }
    wake_.notify_one();
    logger().info("access log {} reopened", target_);
    return true;
  } catch (const std::exception& e) {
    try {
      logger().error("{}; writing on to the file it had open", e.what());
    } catch (...) {
      // nothing more to do about it
    }
    return false;
  }
}

void access_log::flush() noexcept {
  if (!enabled_)
    return;
  assert_not_on_loop("access log: flush");
  std::unique_lock<std::mutex> lock{mx_};
  auto target = queued_seq_;
  if (written_seq_ >= target)
    return;
  flush_asked_ = true;
  wake_.notify_one();
  written_.wait(lock, [&] { return written_seq_ >= target || writer_done_; });
}

// -- the writer thread --------------------------------------------------------

void access_log::run() noexcept {
  // For `top -H` and /proc/PID/task/*/comm (at most 15 bytes).
  ::pthread_setname_np(::pthread_self(), "sluice-access");
  std::vector<entry> batch;
  std::string buf;
  std::unique_lock<std::mutex> lock{mx_};
  auto taken_at = std::chrono::steady_clock::now();
  for (;;) {
    if (queue_.empty()) {
      if (stopping_)
        break;
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        break; // stopping, nothing left
      taken_at = std::chrono::steady_clock::now();
    }
    // Every queued line came after `taken_at`: it waits at most the
    // interval, unless a batch fills first.
    wake_.wait_until(lock, taken_at + options_.flush_interval, [&] {
      return stopping_ || flush_asked_ ||
             queued_bytes_ >= access_write_batch_bytes;
    });
    flush_asked_ = false;
    batch.swap(queue_);
    queued_bytes_ = 0;
    auto upto = queued_seq_;
    taken_at = std::chrono::steady_clock::now();
    lock.unlock();
    if (options_.before_batch)
      options_.before_batch();
    write_batch(batch, buf);
    // A flood's storage is not kept (64 Ki entries: ~20 MB).
    if (batch.capacity() > 4096)
      std::vector<entry>{}.swap(batch);
    else
      batch.clear();
    warn_dropped(false);
    lock.lock();
    written_seq_ = upto;
    written_.notify_all();
  }
  writer_done_ = true;
  written_.notify_all();
  lock.unlock();
  warn_dropped(true);
}

void access_log::write_batch(std::vector<entry>& batch,
                             std::string& buf) noexcept {
  for (auto& e : batch) {
    try {
      switch (e.what) {
      case entry::kind::record:
        buf += access_line(e.record);
        buf += '\n';
        break;
      case entry::kind::text:
        buf += e.text;
        buf += '\n';
        break;
      case entry::kind::switch_file:
        // What came before the reopen goes to the old file.
        write_out(buf);
        buf.clear();
        if (owns_fd_)
          ::close(fd_);
        fd_ = e.fd;
        owns_fd_ = true;
        break;
      }
    } catch (...) {
      // A line that cannot be made (no memory) is lost, not the others.
    }
    if (buf.size() >= access_write_batch_bytes) {
      write_out(buf);
      buf.clear();
    }
  }
  write_out(buf);
  buf.clear();
  if (buf.capacity() > 4 * access_write_batch_bytes)
    std::string{}.swap(buf);
}

void access_log::write_out(const std::string& bytes) noexcept {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    auto n = ::write(fd_, p, left);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // stdout may be a non-blocking pipe: wait for room, off the loops.
      // NOTE: a reader that never reads holds the writer (and the stop)
      // here; the loops only see the queue fill and drop lines.
      pollfd pfd{fd_, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
      continue;
    }
    try {
      log_limited(write_failure_log, spdlog::level::err,
                  "access log {}: write failed ({}); {} byte(s) of lines lost",
                  target_, n < 0 ? std::strerror(errno) : "no progress", left);
    } catch (...) {
      // nothing more to do about it
    }
    return;
  }
}

void access_log::warn_dropped(bool final) noexcept {
  auto dropped = dropped_total_.load(std::memory_order_relaxed);
  if (dropped == dropped_warned_)
    return;
  auto now = std::chrono::steady_clock::now();
  if (!final && dropped_warned_ != 0 &&
      now - warned_at_ < access_drop_warning_interval)
    return;
  try {
    logger().warn("access log {}: {} line(s) dropped since the last warning "
                  "({} in all): the writer's queue was full ({} lines, {} "
                  "bytes at most)",
                  target_, dropped - dropped_warned_, dropped,
                  options_.max_queued_lines, options_.max_queued_bytes);
  } catch (...) {
    // nothing more to do about it
  }
  dropped_warned_ = dropped;
  warned_at_ = now;
}

} // namespace sluice::node
