#include "sluice/runtime/policy/call/source_order.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::policy {

std::vector<size_t> source_order(size_t count,
                                 const std::vector<double>& weights,
                                 std::optional<size_t> last_failed,
                                 small_rng& rng) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!weights.empty()) {
    std::vector<double> key(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      key[i] = std::pow(rng.uniform(), 1.0 / weights[i]);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return key[a] > key[b]; });
  }
  if (last_failed && order.size() > 1) {
    auto i = std::find(order.begin(), order.end(), *last_failed);
    std::rotate(i, i + 1, order.end());
  }
  return order;
}

} // namespace sluice::policy
