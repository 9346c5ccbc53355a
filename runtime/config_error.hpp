#pragma once

#include <stdexcept>
#include <string>

namespace sluice {

/// A configuration value that Sluice refuses. Always names the offending key
/// (dotted, as in the config file) so the user knows what to fix.
class config_error : public std::invalid_argument {
public:
  config_error(std::string key, const std::string& problem)
      : std::invalid_argument(key + ": " + problem)
      , key_(std::move(key)) {
    // nop
  }

  /// The dotted key of the refused value, e.g. `admission.session_cap`.
  const std::string& key() const noexcept { return key_; }

private:
  std::string key_;
};

} // namespace sluice
