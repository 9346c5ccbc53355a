#pragma once

// Rewriting a call's JSON body for one source.

#include <string>
#include <string_view>

namespace sluice {

/// `payload` with its top-level `model` set to `model`. A payload that is
/// not a JSON object is returned unchanged (the source then judges it).
/// Invalid UTF-8 elsewhere in it is kept as the replacement character.
std::string with_model(std::string_view payload, const std::string& model);

} // namespace sluice
