#include "sluice/runtime/node/access_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "sluice/actors/log.hpp"
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

std::shared_ptr<spdlog::logger> open_logger(const std::string& target) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (target == "stdout") {
    sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  } else {
    // spdlog's fopen blocks on a FIFO until someone reads it: the start,
    // or the signal thread reopening the log, would hang with it. Opened
    // first without blocking, and only a regular file (or a device such as
    // /dev/null) goes on; the file is created here if it is missing.
    auto usable = [](const struct stat& st) {
      return S_ISREG(st.st_mode) || S_ISCHR(st.st_mode);
    };
    struct stat st {};
    bool fits = ::stat(target.c_str(), &st) != 0 || usable(st);
    if (fits) {
      int fd = ::open(target.c_str(),
                      O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC,
                      0644);
      if (fd < 0)
        throw std::runtime_error("cannot open the access log '" + target +
                                 "': " + std::strerror(errno));
      fits = ::fstat(fd, &st) == 0 && usable(st); // swapped meanwhile?
      ::close(fd);
    }
    if (!fits)
      throw std::runtime_error("the access log '" + target +
                               "' is not a regular file (a FIFO or socket "
                               "would block the node; \"stdout\" writes to "
                               "the standard output)");
    try {
      // spdlog opens the file "ab" (O_APPEND): see `access_log::reopen`.
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(target);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot open the access log '" + target +
                               "': " + e.what());
    }
  }
  // Not registered with spdlog: several fronts may live in one process.
  auto logger =
      std::make_shared<spdlog::logger>("sluice.access", std::move(sink));
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  return logger;
}

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
  return json_text(line);
}

access_log::access_log(const std::string& target)
    : target_(target)
    , sampler_(steady::now()) {
  if (target == "off")
    return;
  logger_ = open_logger(target);
  enabled_ = true;
}

access_log::~access_log() {
  // The count of a flood's last lines left out, which no later line carries.
  auto logger = std::atomic_load(&logger_);
  if (!logger || sampler_.suppressed() == 0)
    return;
  try {
    logger->info(
        json_text({{"time", utc_text(std::chrono::system_clock::now())},
                   {"suppressed", sampler_.take_suppressed()}}));
  } catch (...) {
    // nothing more to do about it
  }
}

void access_log::write(const access_record& r) noexcept {
  auto logger = std::atomic_load(&logger_);
  if (!logger)
    return;
  try {
    uint64_t left_out = 0;
    {
      std::lock_guard<std::mutex> guard{sampler_mx_};
      if (!sampler_.admit(r.status, !r.key.empty(), steady::now())) {
        ++suppressed_total_;
        return;
      }
      left_out = sampler_.take_suppressed();
    }
    if (left_out == 0)
      return logger->info(access_line(r));
    auto counted = r;
    counted.suppressed = left_out;
    logger->info(access_line(counted));
  } catch (...) {
    // A line that cannot be made (no memory) is lost, not the request.
  }
}

bool access_log::reopen() noexcept {
  if (!enabled_ || target_ == "stdout")
    return true;
  try {
    auto fresh = open_logger(target_);
    std::atomic_store(&logger_, std::move(fresh));
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

} // namespace sluice::node
