// Row reductions over the four lanes of a quad. In both tensor-core fragment layouts (mma.sync
// m16n8k16 accumulators and wgmma accumulators) a row's elements are held by the 4 lanes sharing
// l / 4, so a row max or sum is a thread-local pass plus these two xor-shuffles.
#pragma once

#include "common/host_device.hpp"

namespace flashcore::attn {

FC_DEVICE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

FC_DEVICE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace flashcore::attn
