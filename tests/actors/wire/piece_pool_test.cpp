// The per-thread pool of strings that carry streamed pieces: a string
// given back is taken again with its room (no allocation), within the
// pool's bounds.

#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "sluice/actors/wire/piece_pool.hpp"

using namespace sluice;

namespace {

// The room of a string that holds nothing on the heap.
const size_t small = std::string{}.capacity();

// Empties this thread's pool.
void drain() {
  for (size_t i = 0; i < 2 * piece_pool_strings; ++i)
    (void) take_piece();
}

} // namespace

TEST_CASE("piece_pool: a string given back is taken again with its room",
          "[piece_pool]") {
  drain();
  std::string s(1000, 'x');
  auto* storage = s.data();
  auto room = s.capacity();
  give_back_piece(std::move(s));
  auto again = take_piece();
  CHECK(again.empty());
  CHECK(again.data() == storage); // the same storage: nothing allocated
  CHECK(again.capacity() == room);
  CHECK(take_piece().capacity() <= small); // the pool is empty again
}

TEST_CASE("piece_pool: keeps at most its bound of strings, none too large "
          "and none on another thread",
          "[piece_pool]") {
  drain();
  for (size_t i = 0; i < piece_pool_strings + 10; ++i)
    give_back_piece(std::string(100, 'x'));
  give_back_piece(std::string(piece_pool_max_capacity + 1, 'x'));
  size_t kept = 0;
  while (take_piece().capacity() > small)
    ++kept;
  CHECK(kept == piece_pool_strings);
  // Too large: freed, not kept.
  give_back_piece(std::string(piece_pool_max_capacity + 1, 'x'));
  CHECK(take_piece().capacity() <= small);
  // Another thread has its own pool.
  give_back_piece(std::string(100, 'x'));
  size_t other = 0;
  std::thread{[&] { other = take_piece().capacity(); }}.join();
  CHECK(other <= small);
  CHECK(take_piece().capacity() >= 100);
}
