// The per-thread cache of small blocks behind the HTTP header fields
// (actors/wire/block_allocator.hpp): a block given back serves the next request
// of its size class, the cache per class is bounded, a large block is never
// kept, and a block freed on another thread joins that thread's cache.

#include "sluice/actors/wire/block_allocator.hpp"

#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace sluice;

namespace {

// The class of `bytes` bytes.
std::size_t class_of(std::size_t bytes) {
  return (bytes + block_class_bytes - 1) / block_class_bytes;
}

} // namespace

TEST_CASE("a small block given back serves the next one of its size class") {
  block_allocator<char> a;
  // The thread's cache of the class emptied first (earlier tests in this
  // process may have filled it to its bound).
  std::vector<char*> held;
  while (detail::cached_blocks(class_of(100)) > 0)
    held.push_back(a.allocate(100));
  auto before = detail::cached_blocks(class_of(100));
  char* p = a.allocate(100);
  a.deallocate(p, 100);
  CHECK(detail::cached_blocks(class_of(100)) == before + 1);
  // 120 bytes round up to the same 128-byte class: the same block.
  char* q = a.allocate(120);
  CHECK(q == p);
  CHECK(detail::cached_blocks(class_of(100)) == before);
  a.deallocate(q, 120);
  for (auto* b : held)
    a.deallocate(b, 100);
}

TEST_CASE("a thread keeps at most blocks_kept blocks of a class") {
  block_allocator<char> a;
  std::vector<char*> blocks;
  for (std::size_t i = 0; i < 2 * blocks_kept + 5; ++i)
    blocks.push_back(a.allocate(200));
  for (auto* b : blocks)
    a.deallocate(b, 200);
  CHECK(detail::cached_blocks(class_of(200)) == blocks_kept);
}

TEST_CASE("a block past the largest class is never kept") {
  block_allocator<char> a;
  std::vector<std::size_t> before;
  for (std::size_t c = 1; c <= block_classes; ++c)
    before.push_back(detail::cached_blocks(c));
  auto large = block_classes * block_class_bytes + 1;
  char* p = a.allocate(large);
  a.deallocate(p, large);
  for (std::size_t c = 1; c <= block_classes; ++c)
    CHECK(detail::cached_blocks(c) == before[c - 1]);
}

TEST_CASE("a block freed on another thread joins that thread's cache") {
  block_allocator<char> a;
  char* p = a.allocate(64);
  auto here = detail::cached_blocks(1);
  std::size_t there_before = 0;
  std::size_t there_after = 0;
  std::thread other{[&] {
    there_before = detail::cached_blocks(1);
    a.deallocate(p, 64);
    there_after = detail::cached_blocks(1);
  }};
  other.join();
  CHECK(there_after == there_before + 1);
  CHECK(detail::cached_blocks(1) == here);
}

TEST_CASE("header fields built and dropped leave their blocks for the next "
          "header") {
  auto fill = [] {
    http_fields f;
    f.set("Content-Type", "application/json");
    f.set("X-Request-Id", std::string(40, 'r'));
    f.set("Authorization", "Bearer " + std::string(60, 'k'));
  };
  fill(); // the cache has what one header needs now
  std::vector<std::size_t> before;
  for (std::size_t c = 1; c <= block_classes; ++c)
    before.push_back(detail::cached_blocks(c));
  {
    http_fields f;
    f.set("Content-Type", "application/json");
    f.set("X-Request-Id", std::string(40, 'r'));
    f.set("Authorization", "Bearer " + std::string(60, 'k'));
    std::size_t taken = 0;
    for (std::size_t c = 1; c <= block_classes; ++c)
      taken += before[c - 1] - detail::cached_blocks(c);
    CHECK(taken == 3); // each field from the cache, none from malloc
  }
  for (std::size_t c = 1; c <= block_classes; ++c)
    CHECK(detail::cached_blocks(c) == before[c - 1]);
}
