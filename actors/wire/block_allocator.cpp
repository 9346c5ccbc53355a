#include "sluice/actors/wire/block_allocator.hpp"

namespace sluice::detail {

namespace {

// Fixed arrays: keeping a block never allocates.
struct block_cache {
  void* blocks[block_classes][blocks_kept];
  std::size_t count[block_classes] = {};

  ~block_cache() {
    gone = true;
    for (std::size_t c = 0; c < block_classes; ++c)
      for (std::size_t i = 0; i < count[c]; ++i)
        ::operator delete(blocks[c][i]);
  }

  /// Set as the thread ends: a block freed after that (by another
  /// thread_local's destructor) goes to operator delete.
  static thread_local bool gone;
};

thread_local bool block_cache::gone = false;
thread_local block_cache this_thread_cache;

} // namespace

void* take_block(std::size_t cls) noexcept {
  if (block_cache::gone)
    return nullptr;
  auto& c = this_thread_cache;
  auto& n = c.count[cls - 1];
  return n == 0 ? nullptr : c.blocks[cls - 1][--n];
}

bool keep_block(std::size_t cls, void* p) noexcept {
  if (block_cache::gone)
    return false;
  auto& c = this_thread_cache;
  auto& n = c.count[cls - 1];
  if (n == blocks_kept)
    return false;
  c.blocks[cls - 1][n++] = p;
  return true;
}

std::size_t cached_blocks(std::size_t cls) noexcept {
  return block_cache::gone ? 0 : this_thread_cache.count[cls - 1];
}

} // namespace sluice::detail
