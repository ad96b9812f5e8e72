// Division by a divisor fixed at launch, as a multiply-high and a shift (Granlund and Montgomery's
// round-up method): the multiplier is formed once on the host, so a kernel's quotient costs three
// integer instructions instead of the ~20-instruction dependent chain of a division by a runtime
// value. Exact for dividends in [0, 2^31) and divisors in [1, 2^31).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace flashcore {

struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 0;  // ceil(2^(32 + shift) / divisor) - 2^32
  uint32_t shift = 0;       // ceil(log2(divisor))

  FastDivmod() = default;
  // Host: divisor >= 1.
  explicit FastDivmod(uint32_t d) : divisor(d) {
    while ((uint64_t(1) << shift) < d) ++shift;
    multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }

  // x / divisor for x in [0, 2^31).
  FC_HOST_DEVICE uint32_t div(uint32_t x) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(x, multiplier);
#else
    const uint32_t high = uint32_t((uint64_t(x) * multiplier) >> 32);
#endif
    return (high + x) >> shift;
  }
  // x % divisor for x in [0, 2^31).
  FC_HOST_DEVICE uint32_t mod(uint32_t x) const { return x - div(x) * divisor; }
};

}  // namespace flashcore
