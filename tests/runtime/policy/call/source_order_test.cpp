// The order of one round over a route's sources: preference or weighted
// random, the last failed source last (failover).

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include "sluice/runtime/policy/call/source_order.hpp"

using namespace sluice::policy;

namespace {

using order = std::vector<size_t>;

} // namespace

TEST_CASE("source order: no weights is preference order, no draws") {
  small_rng rng{7};
  small_rng untouched{7};
  CHECK(source_order(3, {}, std::nullopt, rng) == order{0, 1, 2});
  CHECK(rng() == untouched()); // preference order draws nothing
}

TEST_CASE("source order: the last failed source goes last") {
  small_rng rng{1};
  CHECK(source_order(3, {}, size_t{0}, rng) == order{1, 2, 0});
  CHECK(source_order(3, {}, size_t{1}, rng) == order{0, 2, 1});
  CHECK(source_order(3, {}, size_t{2}, rng) == order{0, 1, 2});
}

TEST_CASE("source order: a single source stays, even after it failed") {
  small_rng rng{1};
  CHECK(source_order(1, {}, size_t{0}, rng) == order{0});
  CHECK(source_order(0, {}, std::nullopt, rng).empty());
}

TEST_CASE("source order: weighted order is a permutation, one draw each") {
  small_rng rng{42};
  small_rng copy{42};
  auto got = source_order(4, {1, 2, 3, 4}, std::nullopt, rng);
  auto sorted = got;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == order{0, 1, 2, 3});
  for (int i = 0; i < 4; ++i)
    copy();
  CHECK(rng() == copy());
}

TEST_CASE("source order: the same seed gives the same weighted order") {
  small_rng a{9};
  small_rng b{9};
  for (int i = 0; i < 20; ++i)
    CHECK(source_order(5, {1, 1, 2, 3, 5}, std::nullopt, a) ==
          source_order(5, {1, 1, 2, 3, 5}, std::nullopt, b));
}

TEST_CASE("source order: heavier sources come first more often") {
  small_rng rng{3};
  std::map<size_t, int> first;
  for (int i = 0; i < 4000; ++i)
    ++first[source_order(2, {1, 3}, std::nullopt, rng).front()];
  // P(source 1 first) = 3 / (1 + 3) = 0.75.
  CHECK(first[1] > 2800);
  CHECK(first[1] < 3200);
}

TEST_CASE("source order: failover applies after the weighted draw") {
  small_rng rng{5};
  for (int i = 0; i < 50; ++i) {
    auto got = source_order(3, {1, 1, 1}, size_t{1}, rng);
    CHECK(got.back() == 1);
  }
}
