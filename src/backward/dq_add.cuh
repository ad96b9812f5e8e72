// dQ partials added into the backward workspace's fp32 accumulator from registers: the sm80
// backward's adds, and the sm90 backward's where no shared-memory staging tile fits (kColSplit).
#pragma once

#include <cuda_runtime.h>

#include "common/host_device.hpp"

namespace flashcore::backward {

// Adds one C fragment (an m16n8 tile: rows g and g + 8, columns 2t and 2t + 1) into the fp32
// row-major accumulator whose row g, column 2t is `dst` (row stride `ld` floats). On sm_90 the lane
// pairs (t, t ^ 1) first trade halves so each lane adds four adjacent floats with one vector
// atomic (even t: row g, columns 4 (t / 2) .. + 3; odd t: row g + 8, the same columns), halving the
// atomics that the memory pipeline queues.
FC_DEVICE void add_dq_fragment(float* dst, int ld, const float (&c)[4], int t) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
  const float give0 = odd ? c[0] : c[2], give1 = odd ? c[1] : c[3];
  const float got0 = __shfl_xor_sync(0xffffffffu, give0, 1), got1 = __shfl_xor_sync(0xffffffffu, give1, 1);
  const float4 v = odd ? make_float4(got0, got1, c[2], c[3]) : make_float4(c[0], c[1], got0, got1);
  // red, not atomicAdd: the vector atomicAdd compiles to an atom that returns the old values, and
  // waiting for those registers stalls the warp.
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + (odd ? 8 * ld - 2 : 0)), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w));
#else
  atomicAdd(dst, c[0]);
  atomicAdd(dst + 1, c[1]);
  atomicAdd(dst + 8 * ld, c[2]);
  atomicAdd(dst + 8 * ld + 1, c[3]);
#endif
}

}  // namespace flashcore::backward
