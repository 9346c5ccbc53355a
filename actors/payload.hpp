#pragma once

// Rewriting a call's JSON body for one source.

#include <string>
#include <string_view>

namespace sluice {

/// `payload` with its top-level `model` set to `model`. The body is parsed
/// and written again: keys come out sorted, and integers beyond 64 bits
/// become doubles. A payload that is not a JSON object (or not valid
/// UTF-8, or with a number out of double's range) is returned unchanged:
/// the source then judges it.
std::string with_model(std::string_view payload, const std::string& model);

} // namespace sluice
