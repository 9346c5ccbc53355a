#include "sluice/runtime/node/access_log.hpp"

#include <cmath>
#include <ctime>
#include <stdexcept>

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

json text_or_null(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

double ms_of(duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

} // namespace

std::string access_line(const access_record& r) {
  auto overhead = std::max(r.total - r.upstream, duration::zero());
  return json_text(
      {{"time", utc_text(r.time)},
       {"request_id", text_or_null(r.request_id)},
       {"method", r.method},
       {"path", r.path},
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
            .count()}});
}

access_log::access_log(const std::string& target) {
  if (target == "off")
    return;
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (target == "stdout") {
    sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  } else {
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(target);
    } catch (const std::exception& e) {
      throw std::runtime_error("cannot open the access log '" + target +
                               "': " + e.what());
    }
  }
  // Not registered with spdlog: several fronts may live in one process.
  logger_ = std::make_shared<spdlog::logger>("sluice.access", std::move(sink));
  logger_->set_pattern("%v");
  logger_->set_level(spdlog::level::info);
  logger_->flush_on(spdlog::level::info);
}

access_log::~access_log() = default;

void access_log::write(const access_record& r) noexcept {
  if (!logger_)
    return;
  try {
    logger_->info(access_line(r));
  } catch (...) {
    // A line that cannot be made (no memory) is lost, not the request.
  }
}

} // namespace sluice::node
