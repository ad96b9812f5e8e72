// dQ partials added into the backward workspace's fp32 accumulator from registers: the sm80
// backward's adds, and the sm90 backward's where no shared-memory staging tile fits (kColSplit).
#pragma once

#include <cuda_runtime.h>

#include "common/host_device.hpp"

namespace flashcore::backward {

// Adds two C fragments of adjacent n8 tiles (an m16n16 tile: rows g and g + 8, columns 2t, 2t + 1
// of each tile) into the fp32 row-major accumulator whose row g, column 2t of the first tile is
// `dst` (row stride `ld` floats). On sm_90 the lane pairs (t, t ^ 1) first trade halves so that each
// lane adds four adjacent floats of one row with a vector red: per row half, even t the first
// tile's columns 2t .. 2t + 3, odd t the second tile's 2t - 2 .. 2t + 1, so the quad covers the 16
// columns (64 bytes) of its row and a warp instruction touches 8 rows (two sectors each) rather
// than 16 rows of one sector: half the L2 requests for the same sectors.
FC_DEVICE void add_dq_fragments(float* dst, int ld, const float (&lo)[4], const float (&hi)[4], int t) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Even lanes need their partner's first-tile pair, odd lanes their partner's second-tile pair.
    const float give0 = odd ? lo[2 * r] : hi[2 * r], give1 = odd ? lo[2 * r + 1] : hi[2 * r + 1];
    const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1), got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
    const float4 v = odd ? make_float4(got0, got1, hi[2 * r], hi[2 * r + 1])
                         : make_float4(lo[2 * r], lo[2 * r + 1], got0, got1);
    float* row = dst + 8 * r * ld + (odd ? 6 : 0);  // odd: column 8 + 2t - 2 of the pair = 2t + 6
    // red, not atomicAdd: the vector atomicAdd compiles to an atom that returns the old values, and
    // waiting for those registers stalls the warp.
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(row), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w));
  }
#else
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    atomicAdd(dst + 8 * r * ld, lo[2 * r]);
    atomicAdd(dst + 8 * r * ld + 1, lo[2 * r + 1]);
    atomicAdd(dst + 8 * r * ld + 8, hi[2 * r]);
    atomicAdd(dst + 8 * r * ld + 9, hi[2 * r + 1]);
  }
#endif
}

}  // namespace flashcore::backward
