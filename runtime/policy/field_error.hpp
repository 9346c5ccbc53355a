#pragma once

#include <stdexcept>
#include <string>

namespace sluice {

/// A setting the library refuses: which field of its settings struct (e.g.
/// `open_duration`, `rate_per_s`) and what is wrong with it. Every settings
/// check of the library throws this, so the facade and the config reader
/// name the key (`sources.a.breaker.open_duration_s`, with its line)
/// without reading the message back. `what()` is `FIELD: problem`, and it
/// is a `std::invalid_argument`, as the checks threw before it existed.
class field_error : public std::invalid_argument {
public:
  field_error(std::string field, std::string problem)
      : std::invalid_argument(field + ": " + problem)
      , field_(std::move(field))
      , problem_(std::move(problem)) {
    // nop
  }

  const std::string& field() const noexcept { return field_; }

  const std::string& problem() const noexcept { return problem_; }

private:
  std::string field_;
  std::string problem_;
};

} // namespace sluice
