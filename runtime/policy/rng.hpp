#pragma once

#include <cstdint>
#include <limits>

namespace sluice::policy {

/// A small, fast, seedable random generator for jitter and weighted order:
/// SplitMix64 (Steele, Lea, Flood 2014; the seeder of the xoshiro family).
/// Eight bytes of state instead of `std::mt19937_64`'s 2.5 KiB -- it lives
/// in every governor, one per call in flight -- and one multiply-xorshift
/// round per draw. Statistically sound for jitter; not for cryptography.
/// Meets UniformRandomBitGenerator, so `<random>` distributions accept it.
class small_rng {
public:
  using result_type = uint64_t;

  explicit small_rng(uint64_t seed = 0) noexcept : state_(seed) {
    // nop
  }

  void seed(uint64_t s) noexcept { state_ = s; }

  static constexpr result_type min() noexcept { return 0; }

  static constexpr result_type max() noexcept {
    return std::numeric_limits<result_type>::max();
  }

  result_type operator()() noexcept {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, 1): the top 53 bits as a double's mantissa.
  double uniform() noexcept {
    return static_cast<double>((*this)() >> 11) * 0x1.0p-53;
  }

private:
  uint64_t state_;
};

} // namespace sluice::policy
