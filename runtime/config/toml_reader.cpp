#include "sluice/runtime/config/toml_reader.hpp"

namespace sluice::config {

int line_of(const toml::node& n) {
  return static_cast<int>(n.source().begin.line);
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string{key} : prefix + "." + std::string{key};
}

} // namespace sluice::config
