#pragma once

#include <string_view>

namespace sluice {

/// The config `sluice-node` runs on without `--config`: two simulated
/// sources behind the OpenAI-compatible routes, so it works on a fresh
/// machine without any upstream. Documented, valid TOML.
std::string_view default_config_text();

} // namespace sluice
