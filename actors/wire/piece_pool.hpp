#pragma once

// Strings that carry the pieces of streamed answers, from the upstream's
// reads to the client's writes, kept per thread for reuse (SPEC §11: no
// allocation per relayed event in steady state). The HTTP client reads a
// piece into a string taken from here; the client's writer gives it back
// once written. On the node's event loops both ends run on one thread, so
// the same few strings go round.
//
// Bounded: at most `piece_pool_strings` strings per thread, each of at most
// `piece_pool_max_capacity` bytes of capacity; anything else is freed.

#include <cstddef>
#include <string>

namespace sluice {

/// Strings a thread keeps.
constexpr size_t piece_pool_strings = 64;

/// Largest capacity kept: a string grown past it (a large read) is freed.
constexpr size_t piece_pool_max_capacity = 16 * 1024;

/// An empty string, with the capacity of one given back on this thread if
/// there is one (no allocation).
std::string take_piece() noexcept;

/// Keeps `s` (emptied) for a later `take_piece` on this thread, or frees it.
void give_back_piece(std::string&& s) noexcept;

} // namespace sluice
