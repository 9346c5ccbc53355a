#include "sluice/actors/log.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>

namespace sluice {

spdlog::logger& logger() {
  static auto instance = [] {
    auto lg = std::make_shared<spdlog::logger>(
        "sluice", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    lg->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
    auto level = spdlog::level::info;
    if (auto env = std::getenv("SLUICE_LOG_LEVEL"))
      level = spdlog::level::from_str(env);
    lg->set_level(level);
    lg->flush_on(spdlog::level::warn);
    return lg;
  }();
  return *instance;
}

bool log_limit::allow(uint64_t& suppressed) noexcept {
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto start = window_start_.load(std::memory_order_relaxed);
  if (start == INT64_MIN || now - start >= interval_ns_) {
    // A new interval: whoever moves the window start resets the count.
    if (window_start_.compare_exchange_strong(start, now,
                                              std::memory_order_relaxed))
      in_window_.store(0, std::memory_order_relaxed);
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) >= burst_) {
    held_back_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  suppressed = held_back_.exchange(0, std::memory_order_relaxed);
  return true;
}

} // namespace sluice
