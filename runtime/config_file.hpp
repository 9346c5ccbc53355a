#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/runtime/config/default_config.hpp"
#include "sluice/runtime/config/file_config.hpp"
#include "sluice/runtime/fwd.hpp"

namespace sluice {

/// Parses TOML `text`. Unknown keys, wrong types and nonsense values are
/// refused with a `config_error` naming the dotted key and its line; so are
/// routes naming unknown sources or kinds. `origin` names the text in TOML
/// syntax errors.
file_config parse_config(std::string_view text,
                         std::string_view origin = "config");

/// Reads and parses the file at `path` (`config_error` with key "file" if
/// it cannot be read, is not a regular file, is over 16 MiB or changed
/// while it was read: config/file_snapshot.hpp).
file_config load_config_file(const std::string& path);

/// Adds the source `decl` declares to `rt` (by its type).
void add_declared_source(runtime& rt, const source_decl& decl);

/// Registers the sources and routes of `cfg` with `rt` (whose runtime_config
/// must be `cfg.runtime`).
void install(runtime& rt, const file_config& cfg);

} // namespace sluice
