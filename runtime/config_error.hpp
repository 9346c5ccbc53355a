#pragma once

#include <stdexcept>
#include <string>

#include "sluice/runtime/policy/field_error.hpp"

namespace sluice {

/// A configuration value that Sluice refuses. Always names the offending key
/// (dotted, as in the config file) so the user knows what to fix, and the
/// line when the value came from a file.
class config_error : public std::invalid_argument {
public:
  config_error(std::string key, const std::string& problem, int line = 0)
      : std::invalid_argument(render(key, problem, line))
      , key_(std::move(key))
      , problem_(problem)
      , line_(line) {
    // nop
  }

  /// The dotted key of the refused value, e.g. `admission.session_cap`.
  const std::string& key() const noexcept { return key_; }

  /// What is wrong with it.
  const std::string& problem() const noexcept { return problem_; }

  /// Line in the config file, 0 if unknown.
  int line() const noexcept { return line_; }

private:
  static std::string render(const std::string& key, const std::string& problem,
                            int line) {
    auto text = key + ": " + problem;
    if (line > 0)
      text = "line " + std::to_string(line) + ": " + text;
    return text;
  }

  std::string key_;
  std::string problem_;
  int line_;
};

/// What the library's `validate` functions throw, read back: a
/// `field_error` naming the settings struct's field (or an
/// `std::invalid_argument("field: problem")`); the facade and the config
/// reader turn that into a `config_error` for their own key. `field` is
/// empty when the error names none.
struct field_problem {
  std::string field;
  std::string problem;
};

inline field_problem read_field_problem(const std::invalid_argument& e) {
  if (auto f = dynamic_cast<const field_error*>(&e))
    return {f->field(), f->problem()};
  // A check of a service's own (a custom source's settings) may still say
  // it the old way.
  std::string what = e.what();
  auto colon = what.find(": ");
  if (colon == std::string::npos)
    return {std::string{}, what};
  return {what.substr(0, colon), what.substr(colon + 2)};
}

/// Runs `f`; turns its `std::invalid_argument("field: problem")` (what
/// the settings checks of the library throw) into a `config_error` for the
/// key `prefix.field` (`prefix` alone when no field is named).
template <class F>
void with_key_prefix(const std::string& prefix, F f) {
  try {
    f();
  } catch (const config_error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    auto [field, problem] = read_field_problem(e);
    throw config_error(field.empty() ? prefix : prefix + "." + field, problem);
  }
}

} // namespace sluice
