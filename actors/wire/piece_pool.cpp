#include "sluice/actors/wire/piece_pool.hpp"

#include <vector>

namespace sluice {

namespace {

struct pool {
  std::vector<std::string> strings;
  bool ready = false;
};

thread_local pool this_thread_pool;

} // namespace

std::string take_piece() noexcept {
  auto& p = this_thread_pool;
  if (p.strings.empty())
    return {};
  std::string s = std::move(p.strings.back());
  p.strings.pop_back();
  return s;
}

void give_back_piece(std::string&& s) noexcept {
  auto cap = s.capacity();
  if (cap <= std::string{}.capacity() || cap > piece_pool_max_capacity)
    return; // nothing on the heap, or too large to keep
  auto& p = this_thread_pool;
  if (!p.ready) {
    try {
      p.strings.reserve(piece_pool_strings);
    } catch (...) {
      return; // no memory now: free the string
    }
    p.ready = true;
  }
  if (p.strings.size() >= piece_pool_strings)
    return;
  s.clear();
  p.strings.push_back(std::move(s)); // within the reserved room: no throw
}

} // namespace sluice
