// FastDivmod (src/common/fast_divmod.hpp): the multiply-high quotient equals the division for every
// divisor a kernel is given (page sizes among them) over its whole dividend range [0, 2^31).
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "common/fast_divmod.hpp"

namespace flashcore {
namespace {

void expect_exact(uint32_t divisor, uint32_t x) {
  const FastDivmod d(divisor);
  ASSERT_EQ(d.div(x), x / divisor) << x << " / " << divisor;
  ASSERT_EQ(d.mod(x), x % divisor) << x << " % " << divisor;
}

std::vector<uint32_t> divisors() {
  std::vector<uint32_t> out;
  for (uint32_t d = 1; d <= 1024; ++d) out.push_back(d);
  for (uint32_t shift = 11; shift < 31; ++shift) {
    const uint32_t p = 1u << shift;
    out.insert(out.end(), {p - 1, p, p + 1, 3 * (p / 2) + 7});
  }
  out.push_back(0x7fffffffu);
  return out;
}

TEST(FastDivmod, ExactNearEveryMultipleAndRangeEnds) {
  for (uint32_t d : divisors()) {
    // Around the first multiples, the largest multiples below 2^31 and the range's ends.
    const uint64_t last = 0x7fffffffull;
    for (uint64_t k = 0; k < 64; ++k) {
      for (int64_t delta = -1; delta <= 1; ++delta) {
        const int64_t low = int64_t(k * d) + delta;
        if (low >= 0 && uint64_t(low) <= last) expect_exact(d, uint32_t(low));
        const int64_t high = int64_t(last / d * d) - int64_t(k * d) + delta;
        if (high >= 0 && uint64_t(high) <= last) expect_exact(d, uint32_t(high));
      }
    }
    expect_exact(d, uint32_t(last));
  }
}

TEST(FastDivmod, ExactOnRandomDividends) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> dividend(0, 0x7fffffffu);
  for (uint32_t d : divisors()) {
    for (int i = 0; i < 2000; ++i) expect_exact(d, dividend(rng));
  }
}

TEST(FastDivmod, EveryDividendBelow2To20ForPageSizes) {
  for (uint32_t d : {1u, 8u, 16u, 24u, 48u, 64u, 80u, 96u, 112u, 128u, 176u, 192u, 256u, 1000u}) {
    const FastDivmod fast(d);
    for (uint32_t x = 0; x < (1u << 20); ++x) ASSERT_EQ(fast.div(x), x / d) << x << " / " << d;
  }
}

}  // namespace
}  // namespace flashcore
