#pragma once

// Collects what the `sluice` logger writes while it lives, for tests that
// check a line an operator relies on. Create it before the code under test
// starts logging, from the test's own thread.

#include <algorithm>
#include <memory>
#include <string>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "sluice/actors/log.hpp"

namespace sluice::testing {

class log_capture {
public:
  /// Lines kept (the latest).
  static constexpr std::size_t max_lines = 256;

  log_capture()
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(max_lines)) {
    sink_->set_pattern("%l %v");
    // NOTE: spdlog's sink list is not guarded; tests add and remove the
    // capture while no other thread logs (before and after the code under
    // test runs).
    logger().sinks().push_back(sink_);
  }

  ~log_capture() {
    auto& sinks = logger().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }

  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  /// Whether a line written so far holds every one of `parts`.
  template <class... Ts>
  bool has(const Ts&... parts) const {
    for (auto& line : sink_->last_formatted())
      if ((... && (line.find(parts) != std::string::npos)))
        return true;
    return false;
  }

private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

} // namespace sluice::testing
